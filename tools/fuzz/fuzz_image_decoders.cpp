// libFuzzer target: the ImageDecoder op (PNG with its inflate, baseline JPEG, BMP, PNM, TIFF)
// run as the CPU executor runs it: shape inference decodes the stream to size the output, then
// the kernel. Byte 0 picks the pixel format; the rest is the encoded stream. A hostile header
// (huge width, truncated data, bad Huffman tables) must end in a Status, never a crash, a hang
// or an allocation past what the stream can fill.
#include "ir/eval.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* kFormats[] = {"RGB", "BGR", "Grayscale"};
  gpuopt::Node node;
  node.op = gpuopt::Op::ImageDecoder;
  node.op_type = "ImageDecoder";
  node.name = "decode";
  node.inputs = {0};
  node.outputs = {1};
  gpuopt::Attribute pf;
  pf.kind = gpuopt::Attribute::Kind::kString;
  pf.s = kFormats[data[0] % 3];
  node.attrs.emplace("pixel_format", pf);
  gpuopt::Tensor stream = gpuopt::Tensor::empty(gpuopt::DType::U8, {static_cast<int64_t>(size - 1)});
  if (size > 1) std::memcpy(stream.raw(), data + 1, size - 1);
  (void)gpuopt::eval_node(node, {&stream}, 20, size_t{256} << 20);
  return 0;
}
