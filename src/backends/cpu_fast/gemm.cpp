// Fast f32 MatMul, Gemm and FusedGemm: one GEMM (or one per batch matrix) cut into parts by
// gemm_parts, with Gemm's C and FusedGemm's activation applied to each part right after it.
#include "backends/cpu_fast/fast_kernel.h"
#include "backends/cpu_fast/gemm_dnnl.h"

#include <algorithm>

namespace gpuopt::cpu_fast {
namespace {

Result<Activation> gemm_activation(const Node& n) {
  const std::string name = n.attr_s("activation", "");
  if (name.empty()) return Activation{};
  if (name == "Relu") return Activation{Act::kRelu};
  if (name == "Gelu") {
    const std::string approx = n.attr_s("approximate", "none");
    if (approx == "none") return Activation{Act::kGelu};
    if (approx == "tanh") return Activation{Act::kGeluTanh};
  }
  return Status::Unimplemented("activation");  // the reference reports it
}

class GemmKernel final : public FastKernel {
 public:
  GemmKernel(const Node& n, Activation act, std::unique_ptr<DnnlMatmul> dnnl)
      : act_(act),
        dnnl_(std::move(dnnl)),
        alpha_(n.attr_f("alpha", 1.0f)),
        beta_(n.attr_f("beta", 1.0f)),
        trans_a_(n.attr_i("transA", 0) != 0),
        trans_b_(n.attr_i("transB", 0) != 0) {}

  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    Tensor& y = ctx.out(0);
    if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2) return false;
    const int64_t M = y.dim(0), N = y.dim(1), K = trans_a_ ? a.dim(0) : a.dim(1);
    const Tensor* c = ctx.has_input(2) && beta_ != 0.0f ? ctx.inputs[2] : nullptr;
    int64_t cm = 1, cn = 1;  // C as [cm, cn], each 1 (broadcast) or the full extent
    if (c) {
      if (c->rank() > 2) return false;
      cm = c->rank() == 2 ? c->dim(0) : 1;
      cn = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
      if ((cm != 1 && cm != M) || (cn != 1 && cn != N)) return false;
    }
    const float* A = a.data<float>();
    const float* B = b.data<float>();
    float* Y = y.data<float>();
    const float* C = c ? c->data<float>() : nullptr;
    const int64_t lda = a.dim(1), ldb = b.dim(1);
    // Y's part [m0, m1) x [n0, n1) after its GEMM: alpha (oneDNN's part, which is A op(B)), beta C
    // and the activation, on the thread that computed it while it is in cache.
    auto finish = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1, bool scale) {
      for (int64_t m = m0; m < m1; ++m) {
        float* yr = Y + m * N;
        if (scale && alpha_ != 1.0f)
          for (int64_t j = n0; j < n1; ++j) yr[j] *= alpha_;
        if (scale && C) {
          const float* cr = C + (cm == 1 ? 0 : m) * cn;
          if (cn == 1)
            for (int64_t j = n0; j < n1; ++j) yr[j] += beta_ * cr[0];
          else
            for (int64_t j = n0; j < n1; ++j) yr[j] += beta_ * cr[j];
        }
        apply_activation(act_, yr + n0, n1 - n0);
      }
    };
    if (dnnl_ && !trans_a_ &&
        dnnl_->run(M, A, lda, B, Y,
                   [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { finish(m0, m1, n0, n1, true); }))
      return true;
    // sgemm parts: beta C written first, then accumulated into by the part's sgemm.
    for_each_gemm_part(M, N, K, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      if (C)
        for (int64_t m = m0; m < m1; ++m) {
          const float* cr = C + (cm == 1 ? 0 : m) * cn;
          float* yr = Y + m * N;
          for (int64_t j = n0; j < n1; ++j) yr[j] = beta_ * cr[cn == 1 ? 0 : j];
        }
      const float* Ap = trans_a_ ? A + m0 : A + m0 * lda;
      const float* Bp = trans_b_ ? B + n0 * ldb : B + n0;
      sgemm_serial(trans_a_, trans_b_, m1 - m0, n1 - n0, K, alpha_, Ap, lda, Bp, ldb, C ? 1.0f : 0.0f,
                   Y + m0 * N + n0, N);
      finish(m0, m1, n0, n1, false);
    });
    return true;
  }

 private:
  Activation act_;
  std::unique_ptr<DnnlMatmul> dnnl_;  // null: no oneDNN, or B not a constant
  float alpha_, beta_;
  bool trans_a_, trans_b_;
};

class MatMulKernel final : public FastKernel {
 public:
  explicit MatMulKernel(std::unique_ptr<DnnlMatmul> dnnl) : dnnl_(std::move(dnnl)) {}

  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    Tensor& y = ctx.out(0);
    if (a.rank() < 2 || b.rank() < 2) return false;  // 1-D operands: the reference
    const int64_t M = a.dim(a.rank() - 2), K = a.dim(a.rank() - 1), N = b.dim(b.rank() - 1);
    const float* A = a.data<float>();
    const float* B = b.data<float>();
    float* Y = y.data<float>();
    if (b.rank() == 2) {  // weights: every batch matrix of A is rows of one GEMM
      if (dnnl_ && dnnl_->run(a.numel() / K, A, K, B, Y, [](int64_t, int64_t, int64_t, int64_t) {})) return true;
      sgemm(false, false, a.numel() / K, N, K, 1.0f, A, K, B, N, 0.0f, Y, N);
      return true;
    }
    // Batched, with numpy broadcasting of the batch dims: offsets of each output batch matrix's
    // A and B matrices.
    const Shape ybatch(y.shape().begin(), y.shape().end() - 2);
    auto batch_of = [&](const Tensor& t) {
      Shape s(t.shape().begin(), t.shape().end() - 2);
      s.insert(s.begin(), ybatch.size() - s.size(), 1);
      return s;
    };
    const Shape ab = batch_of(a), bb = batch_of(b);
    int64_t nb = 1;
    for (int64_t d : ybatch) nb *= d;
    std::vector<int64_t> ao(static_cast<size_t>(nb)), bo(static_cast<size_t>(nb));
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, oa = 0, ob = 0, sa = 1, sb = 1;
      for (size_t d = ybatch.size(); d-- > 0;) {
        const int64_t idx = rem % ybatch[d];
        rem /= ybatch[d];
        oa += (ab[d] == 1 ? 0 : idx) * sa;
        ob += (bb[d] == 1 ? 0 : idx) * sb;
        sa *= ab[d];
        sb *= bb[d];
      }
      ao[static_cast<size_t>(i)] = oa * M * K;
      bo[static_cast<size_t>(i)] = ob * K * N;
    }
    if (nb >= run_threads()) {
      parallel(nb, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          sgemm_serial(false, false, M, N, K, 1.0f, A + ao[static_cast<size_t>(i)], K, B + bo[static_cast<size_t>(i)],
                       N, 0.0f, Y + i * M * N, N);
      });
    } else {
      for (int64_t i = 0; i < nb; ++i)
        sgemm(false, false, M, N, K, 1.0f, A + ao[static_cast<size_t>(i)], K, B + bo[static_cast<size_t>(i)], N, 0.0f,
              Y + i * M * N, N);
    }
    return true;
  }

 private:
  std::unique_ptr<DnnlMatmul> dnnl_;  // null: no oneDNN, or B not a 2-D constant
};

// oneDNN's matmul for a constant 2-D B (K x N, or N x K when trans_b), else nullptr.
std::unique_ptr<DnnlMatmul> packed_b(const Graph& graph, ValueId b, bool trans_b) {
  const Value& v = graph.value(b);
  if (!v.constant || v.constant->rank() != 2) return nullptr;
  const int64_t r = v.constant->dim(0), c = v.constant->dim(1);
  return trans_b ? DnnlMatmul::make(c, r, true) : DnnlMatmul::make(r, c, false);
}

}  // namespace

std::unique_ptr<FastKernel> make_gemm_kernel(const Node& node, const Graph& graph) {
  if (node.op != Op::MatMul && node.op != Op::Gemm && node.op != Op::FusedGemm) return nullptr;
  if (node.inputs.size() < 2) return nullptr;
  for (ValueId v : node.inputs)
    if (v != kNoValue && !is_f32(graph, v)) return nullptr;
  if (node.outputs.empty() || !is_f32(graph, node.outputs[0])) return nullptr;
  if (node.op == Op::MatMul) return std::make_unique<MatMulKernel>(packed_b(graph, node.inputs[1], false));
  Activation act;
  if (node.op == Op::FusedGemm) {
    auto a = gemm_activation(node);
    if (!a.ok()) return nullptr;
    act = *a;
  }
  return std::make_unique<GemmKernel>(node, act, packed_b(graph, node.inputs[1], node.attr_i("transB", 0) != 0));
}

}  // namespace gpuopt::cpu_fast
