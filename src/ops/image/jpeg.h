// Baseline JPEG decoding for ImageDecoder (misc_image_decode.cpp), without a codec library.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <vector>

namespace gpuopt::jpeg {

// Decodes a baseline (SOF0/SOF1, Huffman, 8-bit) JPEG with 1 or 3 components into interleaved
// RGB (grey replicated), bit-exact with libjpeg's defaults: the "islow" integer IDCT, fancy
// (triangle) chroma upsampling and its fixed-point YCbCr->RGB. Progressive, arithmetic-coded,
// 12-bit and CMYK images are reported as unsupported.
Status decode(const std::vector<uint8_t>& data, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb);

}  // namespace gpuopt::jpeg
