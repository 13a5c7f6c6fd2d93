// Fast f32 Attention (opset 23's SDPA, as fuse_attention writes it: 3-D, 4-D or qkv_packed,
// MHA/GQA heads, bool or additive mask broadcast over [B, H, Sq, L], is_causal) and Softmax over
// the last axis. Per (batch, head): scores = scale Q K^T by sgemm reading Q and K in place
// (strided rows of the 3-D or packed tensors), mask and causal terms, softmax per row, then
// Y = P V by sgemm writing straight into Y's layout. KV caches, padding lengths, softcap and the
// qk output stay on the reference.
#include "backends/cpu_fast/fast_kernel.h"
#include "backends/cpu_fast/vec_math.h"

#include <cmath>
#include <limits>
#include <vector>

namespace gpuopt::cpu_fast {
namespace {

constexpr size_t kQ = 0, kK = 1, kV = 2, kMask = 3;

// One operand's [B, H, S, D] view over its storage: element (b, h, s, d) at
// base + b * sb + h * sh + s * ld + d.
struct View {
  const float* base = nullptr;
  int64_t sb = 0, sh = 0, ld = 0;
  const float* at(int64_t b, int64_t h) const { return base + b * sb + h * sh; }
};

class AttentionKernel final : public FastKernel {
 public:
  explicit AttentionKernel(const Node& n)
      : packed_(n.attr_i("qkv_packed", 0) != 0),
        causal_(n.attr_i("is_causal", 0) != 0),
        nan_to_zero_(n.attr_i("nan_to_zero", 0) != 0),
        hq_attr_(n.attr_i("q_num_heads", 0)),
        hkv_attr_(n.attr_i("kv_num_heads", 0)),
        has_scale_(n.has_attr("scale")),
        scale_(n.attr_f("scale", 1.0f)) {}

  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& q = ctx.in(kQ);
    Tensor& y = ctx.out(0);
    int64_t B, Hq, Hkv, Sq, T, Dh, Dv;
    View vq, vk, vv;
    float* Y = y.data<float>();
    int64_t y_sb, y_sh, y_ld;
    if (packed_ || q.rank() == 3) {
      if (hq_attr_ <= 0 || hkv_attr_ <= 0 || q.rank() != 3) return false;
      Hq = hq_attr_, Hkv = hkv_attr_, B = q.dim(0), Sq = q.dim(1);
      if (packed_) {
        const int64_t W = q.dim(2);
        Dh = Dv = W / (Hq + 2 * Hkv), T = Sq;
        const float* base = q.data<float>();
        vq = {base, Sq * W, Dh, W};
        vk = {base + Hq * Dh, Sq * W, Dh, W};
        vv = {base + (Hq + Hkv) * Dh, Sq * W, Dv, W};
      } else {
        const Tensor& k = ctx.in(kK);
        const Tensor& v = ctx.in(kV);
        if (k.rank() != 3 || v.rank() != 3) return false;
        Dh = q.dim(2) / Hq, Dv = v.dim(2) / Hkv, T = k.dim(1);
        vq = {q.data<float>(), Sq * q.dim(2), Dh, q.dim(2)};
        vk = {k.data<float>(), T * k.dim(2), Dh, k.dim(2)};
        vv = {v.data<float>(), T * v.dim(2), Dv, v.dim(2)};
      }
      y_sb = Sq * Hq * Dv, y_sh = Dv, y_ld = Hq * Dv;
    } else if (q.rank() == 4) {
      const Tensor& k = ctx.in(kK);
      const Tensor& v = ctx.in(kV);
      if (k.rank() != 4 || v.rank() != 4) return false;
      B = q.dim(0), Hq = q.dim(1), Sq = q.dim(2), Dh = q.dim(3), Hkv = k.dim(1), T = k.dim(2), Dv = v.dim(3);
      vq = {q.data<float>(), Hq * Sq * Dh, Sq * Dh, Dh};
      vk = {k.data<float>(), Hkv * T * Dh, T * Dh, Dh};
      vv = {v.data<float>(), Hkv * T * Dv, T * Dv, Dv};
      y_sb = Hq * Sq * Dv, y_sh = Sq * Dv, y_ld = Dv;
    } else {
      return false;
    }
    if (Hkv <= 0 || Hq % Hkv != 0 || Dh <= 0) return false;
    // The mask right-aligned to [B, H, Sq, L]: strides 0 where it broadcasts.
    const Tensor* mask = ctx.has_input(kMask) ? ctx.inputs[kMask] : nullptr;
    int64_t L = T, m0 = 0, m1 = 0, m2 = 0;
    if (mask) {
      if (mask->rank() < 1 || mask->rank() > 4) return false;
      Shape ms(static_cast<size_t>(4 - mask->rank()), 1);
      ms.insert(ms.end(), mask->shape().begin(), mask->shape().end());
      L = ms[3];
      if (L > T) return false;
      m2 = ms[2] == 1 ? 0 : L;
      m1 = ms[1] == 1 ? 0 : ms[2] * L;
      m0 = ms[0] == 1 ? 0 : ms[1] * ms[2] * L;
    }
    const bool mask_bool = mask && mask->dtype() == DType::Bool;
    const float scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(Dh));
    const float ninf = -std::numeric_limits<float>::infinity();
    const int64_t group = Hq / Hkv;
    // Units: (batch, head) pairs; with fewer of them than threads (BERT-base at batch 1 has 12
    // heads), each head's query rows in QS blocks as well.
    const int threads = run_threads();
    const int64_t QS = B * Hq >= threads ? 1 : std::max<int64_t>(1, std::min(Sq, (threads + B * Hq - 1) / (B * Hq)));
    const int64_t qrows = (Sq + QS - 1) / QS;
    parallel(B * Hq * QS, 1, [&](int64_t u0, int64_t u1) {
      std::vector<float> s(static_cast<size_t>(qrows * T));
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / QS / Hq, h = u / QS % Hq, hk = h / group;
        const int64_t i0 = u % QS * qrows, nq = std::min(Sq, i0 + qrows) - i0;  // query rows [i0, i0 + nq)
        if (nq <= 0) continue;
        sgemm_serial(false, true, nq, T, Dh, scale, vq.at(b, h) + i0 * vq.ld, vq.ld, vk.at(b, hk), vk.ld, 0.0f, s.data(),
                     T);
        for (int64_t r = 0; r < nq; ++r) {
          const int64_t i = i0 + r;
          float* row = s.data() + r * T;
          if (mask) {
            const int64_t off = b * m0 + h * m1 + i * m2;
            if (mask_bool) {
              const auto* mr = static_cast<const uint8_t*>(mask->raw()) + off;
              for (int64_t j = 0; j < L; ++j) row[j] = mr[j] ? row[j] : ninf;
            } else {
              const float* mr = mask->data<float>() + off;
              for (int64_t j = 0; j < L; ++j) row[j] += mr[j];
            }
            for (int64_t j = L; j < T; ++j) row[j] = ninf;
          }
          if (causal_)
            for (int64_t j = i + 1; j < T; ++j) row[j] = ninf;
          vec::softmax_row(row, T);
        }
        float* yp = Y + b * y_sb + h * y_sh + i0 * y_ld;
        sgemm_serial(false, false, nq, Dv, T, 1.0f, s.data(), T, vv.at(b, hk), vv.ld, 0.0f, yp, y_ld);
        if (nan_to_zero_)
          for (int64_t r = 0; r < nq; ++r)
            for (int64_t e = 0; e < Dv; ++e)
              if (std::isnan(yp[r * y_ld + e])) yp[r * y_ld + e] = 0.0f;
      }
    });
    return true;
  }

 private:
  bool packed_, causal_, nan_to_zero_;
  int64_t hq_attr_, hkv_attr_;
  bool has_scale_;
  float scale_;
};

class SoftmaxKernel final : public FastKernel {
 public:
  explicit SoftmaxKernel(int64_t axis) : axis_(axis) {}
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (x.rank() == 0 || (axis_ != -1 && axis_ != x.rank() - 1)) return false;
    const int64_t n = x.dim(x.rank() - 1), rows = n ? x.numel() / n : 0;
    const float* X = x.data<float>();
    float* Y = y.data<float>();
    parallel(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        if (Y != X) std::copy(X + r * n, X + (r + 1) * n, Y + r * n);
        vec::softmax_row(Y + r * n, n);
      }
    });
    return true;
  }

 private:
  int64_t axis_;
};

}  // namespace

std::unique_ptr<FastKernel> make_attention_kernel(const Node& node, const Graph& graph) {
  if (node.op == Op::Softmax) {
    // Softmax-13's per-axis form only (older opsets coerce to 2-D: the reference).
    if (graph.opset_for(node) < 13 || node.inputs.empty() || !is_f32(graph, node.inputs[0])) return nullptr;
    return std::make_unique<SoftmaxKernel>(node.attr_i("axis", -1));
  }
  if (node.op != Op::Attention) return nullptr;
  const bool packed = node.attr_i("qkv_packed", 0) != 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId v = node.inputs[i];
    if (v == kNoValue) continue;
    if (i > kMask) return nullptr;  // past_key/past_value, nonpad_kv_seqlen
    if (i == kMask) {
      const DType m = graph.value(v).info.dtype;
      if (m != DType::Bool && m != DType::F32) return nullptr;
    } else if (!is_f32(graph, v)) {
      return nullptr;
    }
  }
  if (node.inputs.empty() || (!packed && node.inputs.size() < 3)) return nullptr;
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] != kNoValue) return nullptr;  // present_key/value, qk output
  if (node.outputs.empty() || !is_f32(graph, node.outputs[0])) return nullptr;
  if (node.attr_f("softcap", 0.0f) != 0.0f) return nullptr;
  return std::make_unique<AttentionKernel>(node);
}

}  // namespace gpuopt::cpu_fast
