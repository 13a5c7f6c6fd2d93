// Fast f32 elementwise ops and pools: Add/Sub/Mul/Div where one operand is the other's shape or
// a suffix of it (a bias, a scalar), Relu/Gelu/Tanh/Sigmoid/Erf, GlobalAveragePool and 2-D
// MaxPool, in flat f32 loops split over the run's threads. Other broadcasts stay on the reference.
#include "backends/cpu_fast/fast_kernel.h"
#include "backends/cpu_fast/vec_math.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <limits>

namespace gpuopt::cpu_fast {
namespace {

constexpr int64_t kGrain = 16384;  // elements per chunk: below it a split costs more than it gains

enum class Bin : uint8_t { kAdd, kSub, kMul, kDiv };

template <Bin op>
inline float bin(float a, float b) {
  if constexpr (op == Bin::kAdd) return a + b;
  if constexpr (op == Bin::kSub) return a - b;
  if constexpr (op == Bin::kMul) return a * b;
  return a / b;
}

// a's shape with leading 1s removed is a suffix of y's: a repeats every a.numel() elements.
bool is_suffix(const Tensor& a, const Tensor& y) {
  Shape s = a.shape();
  while (!s.empty() && s.front() == 1) s.erase(s.begin());
  return s.size() <= y.shape().size() && std::equal(s.begin(), s.end(), y.shape().end() - static_cast<int64_t>(s.size()));
}

template <Bin op>
void binary(const float* a, int64_t na, const float* b, int64_t nb, float* y, int64_t n) {
  parallel(n, kGrain, [&](int64_t i0, int64_t i1) {
    if (na == n && nb == n) {
      for (int64_t i = i0; i < i1; ++i) y[i] = bin<op>(a[i], b[i]);
    } else if (nb == 1) {
      const float bv = b[0];
      for (int64_t i = i0; i < i1; ++i) y[i] = bin<op>(a[i], bv);
    } else if (na == 1) {
      const float av = a[0];
      for (int64_t i = i0; i < i1; ++i) y[i] = bin<op>(av, b[i]);
    } else if (na == n) {  // b repeats with period nb
      for (int64_t i = i0; i < i1;) {
        const int64_t j0 = i % nb, len = std::min(i1 - i, nb - j0);
        for (int64_t j = 0; j < len; ++j) y[i + j] = bin<op>(a[i + j], b[j0 + j]);
        i += len;
      }
    } else {  // a repeats
      for (int64_t i = i0; i < i1;) {
        const int64_t j0 = i % na, len = std::min(i1 - i, na - j0);
        for (int64_t j = 0; j < len; ++j) y[i + j] = bin<op>(a[j0 + j], b[i + j]);
        i += len;
      }
    }
  });
}

class BinaryKernel final : public FastKernel {
 public:
  explicit BinaryKernel(Bin op) : op_(op) {}
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    Tensor& y = ctx.out(0);
    if (!is_suffix(a, y) || !is_suffix(b, y)) return false;
    if ((a.numel() != y.numel() && b.numel() != y.numel()) || a.numel() == 0 || b.numel() == 0) return false;
    const float *A = a.data<float>(), *B = b.data<float>();
    float* Y = y.data<float>();
    switch (op_) {
      case Bin::kAdd: binary<Bin::kAdd>(A, a.numel(), B, b.numel(), Y, y.numel()); break;
      case Bin::kSub: binary<Bin::kSub>(A, a.numel(), B, b.numel(), Y, y.numel()); break;
      case Bin::kMul: binary<Bin::kMul>(A, a.numel(), B, b.numel(), Y, y.numel()); break;
      case Bin::kDiv: binary<Bin::kDiv>(A, a.numel(), B, b.numel(), Y, y.numel()); break;
    }
    return true;
  }

 private:
  Bin op_;
};

class UnaryKernel final : public FastKernel {
 public:
  explicit UnaryKernel(Act act) : act_{act} {}
  Result<bool> run(KernelContext& ctx) const override {
    const float* X = ctx.in(0).data<float>();
    float* Y = ctx.out(0).data<float>();
    parallel(ctx.in(0).numel(), kGrain, [&](int64_t i0, int64_t i1) {
      if (act_.kind == Act::kNone) {  // Erf
        vec::erf(X + i0, Y + i0, i1 - i0);
        return;
      }
      if (X != Y) std::copy(X + i0, X + i1, Y + i0);
      apply_activation(act_, Y + i0, i1 - i0);
    });
    return true;
  }

 private:
  Activation act_;
};

class GlobalAveragePoolKernel final : public FastKernel {
 public:
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    if (x.rank() < 3) return false;
    const int64_t planes = x.dim(0) * x.dim(1), n = planes ? x.numel() / planes : 0;
    const float* X = x.data<float>();
    float* Y = ctx.out(0).data<float>();
    parallel(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        float mean, var;
        vec::moments(X + p * n, n, &mean, &var);  // the mean (the variance is a by-product)
        Y[p] = mean;
      }
    });
    return true;
  }
};

class MaxPoolKernel final : public FastKernel {
 public:
  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (x.rank() != 4 || y.rank() != 4) return false;
    const std::vector<int64_t> kernel = ctx.node.attr_ints("kernel_shape");
    if (kernel.size() != 2) return false;
    GPUOPT_ASSIGN_OR_RETURN(nn::Window w, nn::resolve_window(ctx, Shape(x.shape().begin() + 2, x.shape().end()), kernel,
                                                             ctx.node.attr_i("ceil_mode", 0) != 0));
    const int64_t H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
    if (w.out[0] != OH || w.out[1] != OW) return false;
    const int64_t sh = w.strides[0], sw = w.strides[1], ph = w.pad_begin[0], pw = w.pad_begin[1];
    const int64_t dh = w.dilations[0], dw = w.dilations[1];
    const float* X = x.data<float>();
    float* Y = y.data<float>();
    parallel(x.dim(0) * x.dim(1), 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const float* xp = X + p * H * W;
        float* out = Y + p * OH * OW;
        std::fill(out, out + OH * OW, -std::numeric_limits<float>::infinity());
        for (int64_t kh = 0; kh < kernel[0]; ++kh)
          for (int64_t kw = 0; kw < kernel[1]; ++kw) {
            const int64_t off_w = kw * dw - pw;
            const int64_t lo = std::max<int64_t>(0, (-off_w + sw - 1) / sw);
            const int64_t hi = std::min<int64_t>(OW, off_w >= W ? 0 : (W - 1 - off_w) / sw + 1);
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * sh - ph + kh * dh;
              if (ih < 0 || ih >= H) continue;
              const float* row = xp + ih * W + off_w;
              float* o = out + oh * OW;
              for (int64_t ow = lo; ow < hi; ++ow) o[ow] = std::max(o[ow], row[ow * sw]);
            }
          }
      }
    });
    return true;
  }
};

}  // namespace

std::unique_ptr<FastKernel> make_elementwise_kernel(const Node& node, const Graph& graph) {
  if (node.inputs.empty() || node.outputs.empty()) return nullptr;
  for (ValueId v : node.inputs)
    if (v != kNoValue && !is_f32(graph, v)) return nullptr;
  if (!is_f32(graph, node.outputs[0])) return nullptr;
  switch (node.op) {
    case Op::Add: return std::make_unique<BinaryKernel>(Bin::kAdd);
    case Op::Sub: return std::make_unique<BinaryKernel>(Bin::kSub);
    case Op::Mul: return std::make_unique<BinaryKernel>(Bin::kMul);
    case Op::Div: return std::make_unique<BinaryKernel>(Bin::kDiv);
    case Op::Relu: return std::make_unique<UnaryKernel>(Act::kRelu);
    case Op::Tanh: return std::make_unique<UnaryKernel>(Act::kTanh);
    case Op::Sigmoid: return std::make_unique<UnaryKernel>(Act::kSigmoid);
    case Op::Erf: return std::make_unique<UnaryKernel>(Act::kNone);
    case Op::Gelu: {
      const std::string approx = node.attr_s("approximate", "none");
      if (approx != "none" && approx != "tanh") return nullptr;
      return std::make_unique<UnaryKernel>(approx == "tanh" ? Act::kGeluTanh : Act::kGelu);
    }
    case Op::GlobalAveragePool: return std::make_unique<GlobalAveragePoolKernel>();
    case Op::MaxPool:
      if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) return nullptr;  // indices: the reference
      if (node.attr_i("storage_order", 0) != 0) return nullptr;
      return std::make_unique<MaxPoolKernel>();
    default: return nullptr;
  }
}

}  // namespace gpuopt::cpu_fast
