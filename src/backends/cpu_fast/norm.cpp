// Fast f32 LayerNormalization (last axis) and SkipLayerNormalization (s = input + skip [+ bias],
// LayerNorm(s) * gamma [+ beta], optionally writing s): one pass per row in f32, rows split over
// the run's threads. Statistics outputs (mean, inv_std_var) and the quantized output 4 stay on
// the reference.
#include "backends/cpu_fast/fast_kernel.h"
#include "backends/cpu_fast/vec_math.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuopt::cpu_fast {
namespace {

// y = (s - mean) * inv * gamma + beta over one row of n values.
inline void normalize_row(const float* s, int64_t n, float eps, const float* gamma, const float* beta, float* y) {
  float mean, var;
  vec::moments(s, n, &mean, &var);
  const float inv = 1.0f / std::sqrt(var + eps);
  if (beta)
    for (int64_t k = 0; k < n; ++k) y[k] = (s[k] - mean) * inv * gamma[k] + beta[k];
  else
    for (int64_t k = 0; k < n; ++k) y[k] = (s[k] - mean) * inv * gamma[k];
}

// A per-channel vector's values when it is `n` values (possibly with leading 1 dims).
const float* row_vector(const Tensor& t, int64_t n) { return t.numel() == n ? t.data<float>() : nullptr; }

class LayerNormKernel final : public FastKernel {
 public:
  LayerNormKernel(int64_t axis, float eps) : axis_(axis), eps_(eps) {}
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    if (x.rank() == 0 || (axis_ != -1 && axis_ != x.rank() - 1)) return false;
    const int64_t n = x.dim(x.rank() - 1), rows = n ? x.numel() / n : 0;
    const float* gamma = row_vector(ctx.in(1), n);
    const float* beta = ctx.has_input(2) ? row_vector(ctx.in(2), n) : nullptr;
    if (!gamma || (ctx.has_input(2) && !beta)) return false;
    const float* X = x.data<float>();
    float* Y = ctx.out(0).data<float>();
    parallel(rows, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) normalize_row(X + r * n, n, eps_, gamma, beta, Y + r * n);
    });
    return true;
  }

 private:
  int64_t axis_;
  float eps_;
};

class SkipLayerNormKernel final : public FastKernel {
 public:
  explicit SkipLayerNormKernel(float eps) : eps_(eps) {}
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& skip = ctx.in(1);
    if (x.rank() == 0) return false;
    const int64_t n = x.dim(x.rank() - 1), rows = n ? x.numel() / n : 0;
    // skip is input-shaped, or (leading 1s aside) input's trailing dims: [1,S,H] or [S,H] repeat
    // over the batch.
    Shape st = skip.shape();
    while (!st.empty() && st.front() == 1 && st.size() > 1) st.erase(st.begin());
    if (st.size() > static_cast<size_t>(x.rank()) || !std::equal(st.begin(), st.end(), x.shape().end() - static_cast<int64_t>(st.size())))
      return false;
    const int64_t skip_rows = n ? skip.numel() / n : 0;
    if (skip_rows == 0 || rows % skip_rows != 0) return false;
    const float* gamma = row_vector(ctx.in(2), n);
    const float* beta = ctx.has_input(3) ? row_vector(ctx.in(3), n) : nullptr;
    const float* bias = ctx.has_input(4) ? row_vector(ctx.in(4), n) : nullptr;
    if (!gamma || (ctx.has_input(3) && !beta) || (ctx.has_input(4) && !bias)) return false;
    const float* X = x.data<float>();
    const float* S = skip.data<float>();
    float* Y = ctx.out(0).data<float>();
    float* sum_out = ctx.outputs.size() > 3 && ctx.outputs[3] ? ctx.out(3).data<float>() : nullptr;
    parallel(rows, 8, [&](int64_t r0, int64_t r1) {
      std::vector<float> tmp(sum_out ? 0 : static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        float* s = sum_out ? sum_out + r * n : tmp.data();
        const float* xr = X + r * n;
        const float* sr = S + (r % skip_rows) * n;
        if (bias)
          for (int64_t k = 0; k < n; ++k) s[k] = xr[k] + sr[k] + bias[k];
        else
          for (int64_t k = 0; k < n; ++k) s[k] = xr[k] + sr[k];
        normalize_row(s, n, eps_, gamma, beta, Y + r * n);
      }
    });
    return true;
  }

 private:
  float eps_;
};

bool requested(const Node& n, size_t o) { return o < n.outputs.size() && n.outputs[o] != kNoValue; }

}  // namespace

std::unique_ptr<FastKernel> make_norm_kernel(const Node& node, const Graph& graph) {
  if (node.op != Op::LayerNormalization && node.op != Op::SkipLayerNormalization) return nullptr;
  for (ValueId v : node.inputs)
    if (v != kNoValue && !is_f32(graph, v)) return nullptr;
  if (node.inputs.size() < 2 || !is_f32(graph, node.outputs[0])) return nullptr;
  if (requested(node, 1) || requested(node, 2)) return nullptr;  // mean, inv_std_var: the reference
  if (node.op == Op::LayerNormalization)
    return std::make_unique<LayerNormKernel>(node.attr_i("axis", -1), node.attr_f("epsilon", 1e-5f));
  if (node.inputs.size() < 3 || requested(node, 4)) return nullptr;
  return std::make_unique<SkipLayerNormKernel>(node.attr_f("epsilon", 1e-12f));
}

}  // namespace gpuopt::cpu_fast
