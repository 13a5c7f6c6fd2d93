// PNG decoding for ImageDecoder (image_decoder.cpp) through libpng.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <vector>

namespace gpuopt::png {

// Decodes any PNG (grey, grey+alpha, RGB, RGBA, palette; 1- to 16-bit; interlaced or not) into
// interleaved 8-bit RGB as Pillow's convert("RGB") does: palette expanded, grey replicated,
// 16-bit samples to their high byte, alpha dropped (not composited), no gamma correction. Chunk
// CRCs and the zlib checksum are not checked (the decoded pixels are); an image larger than
// 65536 on a side, or decoding to more than 1032x the file plus 16 MiB (deflate's own limit), is
// refused before the pixels are allocated.
Status decode(const std::vector<uint8_t>& data, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb);

}  // namespace gpuopt::png
