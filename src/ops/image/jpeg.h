// JPEG decoding for ImageDecoder (image_decoder.cpp) through libjpeg-turbo.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <vector>

namespace gpuopt::jpeg {

// Decodes a baseline or extended (SOF0/SOF1) JPEG with 1 or 3 components into interleaved RGB
// (grey replicated) with libjpeg-turbo's defaults, which is what Pillow does (the node tests'
// expected pixels): the islow integer IDCT and fancy upsampling. Progressive, arithmetic-coded,
// lossless, 12-bit and CMYK images are refused by name; a warning from the library (corrupt
// data) is an error; a frame that decodes to more than 256x the file plus 16 MiB is refused
// before anything is allocated.
Status decode(const std::vector<uint8_t>& data, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb);

}  // namespace gpuopt::jpeg
