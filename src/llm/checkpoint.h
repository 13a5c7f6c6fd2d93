// The weights of a Hugging Face model folder: `model.safetensors` or shards listed in
// `model.safetensors.index.json`, memory-mapped (nothing is copied until a runner uploads it).
//
//   GPUOPT_ASSIGN_OR_RETURN(auto ckpt, open_checkpoint(dir, cfg, progress));
//   const WeightView* w = ckpt->find("model.layers.0.self_attn.q_proj.weight");
//
// Names are Hugging Face's: model.embed_tokens.weight, model.layers.{i}.input_layernorm.weight,
// model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias for Qwen2),
// model.layers.{i}.post_attention_layernorm.weight, model.layers.{i}.mlp.{gate,up,down}_proj.weight,
// model.norm.weight, lm_head.weight (absent when tie_word_embeddings). Linear weights are
// [out_features, in_features], row-major, as PyTorch stores them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "llm/config.h"

namespace gpuopt::llm {

struct QuantizedLinear;  // llm/quantized.h

struct WeightView {
  std::string name;
  DType dtype = DType::Undefined;  // F16, BF16, F32 (others refused at open)
  std::vector<int64_t> shape;
  const void* data = nullptr;  // into a mapping the Checkpoint owns
  size_t bytes = 0;
  std::string file_dtype;  // the safetensors dtype as written ("F16", "I32", "F8_E4M3", ...)
  // A quantized linear weight (GPTQ, AWQ, FP8): shape is the logical [out, in], dtype the one it
  // dequantizes to, data null; read it through dequantize() (llm/quantized.h).
  const QuantizedLinear* quant = nullptr;
};

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  // nullptr when absent.
  virtual const WeightView* find(const std::string& name) const = 0;
  virtual const std::vector<WeightView>& tensors() const = 0;
  virtual size_t total_bytes() const = 0;
};

// (bytes done, bytes total): called as shards are validated/mapped.
using LoadProgress = std::function<void(size_t, size_t)>;

// Opens and validates every tensor the config needs (names, dtypes, shapes, offsets inside the
// file); one line naming the file and tensor on any error.
Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::filesystem::path& model_dir,
                                                    const LlmConfig& cfg,
                                                    const LoadProgress& progress = {});
// Seeded random weights for every tensor the config needs (as vLLM's dummy load): normal(0,
// 0.02) for matrices, 1 for norms, 0 for biases... deterministic for a seed. dtype F16/BF16/F32.
std::unique_ptr<Checkpoint> random_checkpoint(const LlmConfig& cfg, DType dtype, uint64_t seed);

// The names and shapes a config needs, in order (used by open, random and the tests).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_weights(const LlmConfig& cfg);

}  // namespace gpuopt::llm
