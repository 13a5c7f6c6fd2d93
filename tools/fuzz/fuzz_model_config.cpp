// libFuzzer target: a model repository's config.pbtxt (Triton's text format) through the
// parser and the config checks. Must end in a ModelConfig or a Status, never a crash or a hang.
#include "server/model_config.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpuopt::server::parse_model_config(std::string_view(reinterpret_cast<const char*>(data), size),
                                           "fuzz/config.pbtxt");
  return 0;
}
