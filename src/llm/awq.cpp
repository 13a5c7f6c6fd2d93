#include "llm/awq.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/thread_pool.h"
#include "llm/runner.h"
#include "llm/tokenizer.h"

namespace gpuopt::llm {
namespace {

int point_index(const char* p) {
  const std::string s(p);
  return s == "attn_in" ? 0 : s == "o_in" ? 1 : s == "mlp_in" ? 2 : 3;
}

// out[T, N] = x[T, K] . w[N, K]^T, in double (the error is a small difference of large sums).
std::vector<double> product(const std::vector<float>& x, int64_t T, const float* w, int64_t N, int64_t K) {
  std::vector<double> out(static_cast<size_t>(T * N));
  parallel_for(N, 8, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t t = 0; t < T; ++t) {
        double s = 0;
        const float* a = x.data() + t * K;
        const float* b = w + n * K;
        for (int64_t k = 0; k < K; ++k) s += static_cast<double>(a[k]) * b[k];
        out[static_cast<size_t>(t * N + n)] = s;
      }
  });
  return out;
}

}  // namespace

Result<Calibration> collect_activations(const std::filesystem::path& dir, const LlmConfig& cfg, const Checkpoint& ckpt,
                                        const std::filesystem::path& text_file, int64_t max_tokens) {
  std::ifstream f(text_file);
  if (!f) return Status::NotFound("--calibration '{}' cannot be read", text_file.string());
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    return Status::NotFound("'{}' has no tokenizer.json: calibration text needs the model's tokenizer", dir.string());
  GPUOPT_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file(dir / "tokenizer.json"));
  std::vector<std::vector<int64_t>> samples;
  int64_t total = 0;
  for (std::string line; total < max_tokens && std::getline(f, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<int64_t> ids = tok->encode(line, true);
    const int64_t keep = std::min<int64_t>({static_cast<int64_t>(ids.size()), cfg.max_position, max_tokens - total});
    if (keep <= 0) continue;
    ids.resize(static_cast<size_t>(keep));
    for (int64_t id : ids)
      if (id < 0 || id >= cfg.vocab_size)
        return Status::InvalidArgument("--calibration '{}': the tokenizer gives id {}, outside the model's vocabulary of {}",
                                       text_file.string(), id, cfg.vocab_size);
    total += keep;
    samples.push_back(std::move(ids));
  }
  if (samples.empty()) return Status::InvalidArgument("--calibration '{}' has no text", text_file.string());

  Calibration cal;
  cal.tokens = total;
  cal.layers.resize(static_cast<size_t>(cfg.num_layers));
  RunnerOptions ro;
  ro.block_size = 16;
  ro.num_kv_blocks = (cfg.max_position + 15) / 16;
  ro.max_batch = 1;
  ro.activation_hook = [&](int64_t layer, const char* point, const float* x, int64_t T, int64_t dim) {
    LayerActivations& L = cal.layers[static_cast<size_t>(layer)];
    const int p = point_index(point);
    L.dim[static_cast<size_t>(p)] = dim;
    auto& v = L.x[static_cast<size_t>(p)];
    v.insert(v.end(), x, x + T * dim);
  };
  GPUOPT_ASSIGN_OR_RETURN(auto runner, make_cpu_runner(cfg, ckpt, ro));
  std::vector<int32_t> table(static_cast<size_t>(ro.num_kv_blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  for (const auto& ids : samples) {
    StepBatch b;
    b.seqs.push_back({static_cast<int32_t>(ids.size()), 0, &table, false});
    b.tokens.assign(ids.begin(), ids.end());
    std::vector<float> logits;
    GPUOPT_RETURN_IF_ERROR(runner->step(b, &logits));
  }
  return cal;
}

AwqScale awq_search(const std::vector<const std::vector<float>*>& ws, const std::vector<int64_t>& ns, int64_t K,
                    const std::vector<float>& x, int64_t T, int64_t group_size) {
  std::vector<double> mean(static_cast<size_t>(K), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) mean[static_cast<size_t>(k)] += std::fabs(x[static_cast<size_t>(t * K + k)]);
  for (double& m : mean) m /= static_cast<double>(std::max<int64_t>(T, 1));
  std::vector<std::vector<double>> ref;
  double ref_norm = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    ref.push_back(product(x, T, ws[i]->data(), ns[i], K));
    for (double v : ref.back()) ref_norm += v * v;
  }
  AwqScale best;
  best.best_error = INFINITY;
  constexpr int kGrid = 20;
  for (int r = 0; r < kGrid; ++r) {
    const double ratio = static_cast<double>(r) / kGrid;
    std::vector<float> s(static_cast<size_t>(K));
    double lo = INFINITY, hi = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double v = std::max(std::pow(mean[static_cast<size_t>(k)], ratio), 1e-4);
      s[static_cast<size_t>(k)] = static_cast<float>(v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double norm = std::sqrt(hi * lo);
    for (float& v : s) v = static_cast<float>(v / norm);
    double err = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t N = ns[i];
      std::vector<float> scaled(ws[i]->size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          scaled[static_cast<size_t>(n * K + k)] = (*ws[i])[static_cast<size_t>(n * K + k)] * s[static_cast<size_t>(k)];
      IntQuantized q = quantize_int(scaled.data(), N, K, 4, group_size, IntRounding::Awq);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) q.dequantized[static_cast<size_t>(n * K + k)] /= s[static_cast<size_t>(k)];
      const std::vector<double> out = product(x, T, q.dequantized.data(), N, K);
      for (size_t j = 0; j < out.size(); ++j) err += (out[j] - ref[i][j]) * (out[j] - ref[i][j]);
    }
    const double rel = ref_norm > 0 ? std::sqrt(err / ref_norm) : 0.0;
    if (r == 0) best.rtn_error = rel;
    if (rel < best.best_error) {
      best.best_error = rel;
      best.ratio = ratio;
      best.s = s;
    }
  }
  return best;
}

}  // namespace gpuopt::llm
