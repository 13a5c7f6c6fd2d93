// AWQ's activation-aware scale search (Lin et al., "AWQ", and AutoAWQ's auto_scale): the inputs of
// every linear are collected by running calibration text through the fp32 CPU runner; for a group
// of linears sharing an input X, scales s = mean|X|^r (normalised by sqrt(max s * min s)) are tried
// for r = 0, 1/20, ..., 19/20 and the one whose quantized (W * s) / s gives the smallest output
// error on X is kept. Internal to quantize_llm.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/quant_pack.h"

namespace gpuopt::llm {

// Layer inputs [rows, dim] by point: 0 attn_in (q/k/v), 1 o_in, 2 mlp_in (gate/up), 3 down_in.
struct LayerActivations {
  std::array<std::vector<float>, 4> x;
  std::array<int64_t, 4> dim{};
};
struct Calibration {
  std::vector<LayerActivations> layers;
  int64_t tokens = 0;
};

// `text_file`: one sample per line (blank lines skipped), tokenized with the folder's
// tokenizer.json (special tokens added), each line cut to the context; at most `max_tokens`.
Result<Calibration> collect_activations(const std::filesystem::path& model_dir, const LlmConfig& cfg,
                                        const Checkpoint& ckpt, const std::filesystem::path& text_file,
                                        int64_t max_tokens);

struct AwqScale {
  std::vector<float> s;  // [K]
  double ratio = 0;
  double rtn_error = 0, best_error = 0;  // relative output errors (r = 0 and the pick)
};
// ws: the group's [N_i, K] weights (row-major f32); x: [T, K].
AwqScale awq_search(const std::vector<const std::vector<float>*>& ws, const std::vector<int64_t>& ns, int64_t K,
                    const std::vector<float>& x, int64_t T, int64_t group_size);

}  // namespace gpuopt::llm
