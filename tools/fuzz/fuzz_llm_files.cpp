// libFuzzer target: a language-model folder's outside input, config.json (parse_llm_config and
// what is derived from it) and a safetensors file's header (the 8-byte length, the JSON, every
// entry's dtype/shape/offsets). Must end in a value or a Status, never a crash, a hang or a read
// outside the buffer: every accepted tensor's bytes are read here.
#include <cstddef>
#include <cstdint>
#include <string>

#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuopt::llm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = parse_llm_config(text, "fuzz/config.json");
  if (cfg.ok()) {
    volatile int64_t sink = cfg->num_params() + cfg->kv_bytes_per_token(gpuopt::DType::F16);
    for (double f : cfg->rope_inv_freq()) sink = sink + (f > 0);
    if (cfg->num_layers <= 64) sink = sink + static_cast<int64_t>(expected_weights(*cfg).size());
  }
  if (size >= 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (n <= size - 8) {
      auto t = parse_safetensors_header(std::string(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n)),
                                        size - 8 - static_cast<size_t>(n), data + 8 + n, "fuzz/model.safetensors");
      if (t.ok()) {
        volatile unsigned sum = 0;
        for (const WeightView& w : *t)
          for (size_t i = 0; i < w.bytes; ++i) sum = sum + static_cast<const unsigned char*>(w.data)[i];
      }
    }
  }
  return 0;
}
