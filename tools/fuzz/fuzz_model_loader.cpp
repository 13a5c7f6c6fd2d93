// libFuzzer target: arbitrary bytes as an ONNX model. Loading (protobuf parse, import, shape
// inference through every op's infer function) must return a Status, never crash or hang.
#include "onnx/importer.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = gpuopt::load_onnx_model_from_bytes(data, size);
  if (g.ok()) {
    // A loaded graph must describe itself without trouble too.
    for (const auto& v : g->values()) (void)g->shape_string(v.info.shape);
  }
  return 0;
}
