// Fast f32 2-D Conv and FusedConv (y = act(conv(x, w) + b + z)) in NCHW:
//  - a group with one input channel (depthwise, any channel multiplier): direct loops over each
//    output plane, the valid output range of every tap computed up front so the inner loop is a
//    branch-free (vectorised) multiply-add;
//  - otherwise per image and group Y[Mg, O] = W[Mg, Cg*K] x col[Cg*K, O] with sgemm: W as stored
//    is already that row-major matrix; col is X itself for a 1x1 stride-1 unpadded kernel, else
//    im2col of a tile of output positions (sized to stay in L2), built and consumed by one thread.
//  - in builds with oneDNN, 2-D ungrouped convolutions with constant weights go to oneDNN's
//    channels-last kernels first (conv_dnnl.h): a kernel larger than 1x1 always, a 1x1 one when
//    its input, residual or output is stored NHWC (plan_channels_last()).
// Bias, Z and the activation are applied to each output tile right after its GEMM.
#include "backends/cpu_fast/conv_dnnl.h"
#include "backends/cpu_fast/fast_kernel.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace gpuopt::cpu_fast {
namespace {

Result<Activation> conv_activation(const Node& n) {
  const std::string name = n.attr_s("activation", "");
  const std::vector<float> p = n.attr_floats("activation_params");
  if (name.empty()) return Activation{};
  if (name == "Relu") return Activation{Act::kRelu};
  if (name == "Sigmoid") return Activation{Act::kSigmoid};
  if (name == "Tanh") return Activation{Act::kTanh};
  if (name == "HardSwish") return Activation{Act::kHardSwish};
  if (name == "Swish") return Activation{Act::kSwish};
  if (name == "LeakyRelu" && p.size() == 1) return Activation{Act::kLeakyRelu, p[0], 0};
  if (name == "Clip" && p.size() == 2) return Activation{Act::kClip, p[0], p[1]};
  if (name == "HardSigmoid" && p.size() == 2) return Activation{Act::kHardSigmoid, p[0], p[1]};
  return Status::Unimplemented("activation");  // the reference reports it
}

struct Geometry {
  int64_t N, C, H, W, M, G, Cg, Mg, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
  int64_t taps() const { return KH * KW; }
  int64_t out() const { return OH * OW; }
  bool pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && OH == H && OW == W; }
};

// col[(c*KH + kh)*KW + kw][o - o0] for output positions [o0, o1) of channels [c0, c0 + Cg).
void im2col(const Geometry& g, const float* x, int64_t o0, int64_t o1, float* col) {
  const int64_t T = o1 - o0;
  for (int64_t c = 0; c < g.Cg; ++c) {
    const float* src = x + c * g.H * g.W;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        float* dst = col + ((c * g.KH + kh) * g.KW + kw) * T;
        const int64_t off_w = kw * g.dw - g.pw;
        for (int64_t o = o0; o < o1;) {
          const int64_t oh = o / g.OW, ow0 = o % g.OW;
          const int64_t len = std::min(o1, (oh + 1) * g.OW) - o;
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(dst, dst + len, 0.0f);
          } else {
            const float* row = src + ih * g.W;
            if (g.sw == 1) {
              // iw = ow + off_w: zeros left and right of the valid run, one copy between.
              const int64_t lo = std::clamp<int64_t>(-off_w - ow0, 0, len);
              const int64_t hi = std::clamp<int64_t>(g.W - off_w - ow0, lo, len);
              std::fill(dst, dst + lo, 0.0f);
              std::memcpy(dst + lo, row + ow0 + lo + off_w, static_cast<size_t>(hi - lo) * sizeof(float));
              std::fill(dst + hi, dst + len, 0.0f);
            } else {
              for (int64_t j = 0; j < len; ++j) {
                const int64_t iw = (ow0 + j) * g.sw + off_w;
                dst[j] = iw >= 0 && iw < g.W ? row[iw] : 0.0f;
              }
            }
          }
          dst += len;
          o += len;
        }
      }
  }
}

class ConvKernel final : public FastKernel {
 public:
  ConvKernel(Activation act, std::unique_ptr<DnnlConv> dnnl) : act_(act), dnnl_(std::move(dnnl)) {}

  bool channels_last_capable() const override { return dnnl_ != nullptr; }
  void set_channels_last(bool x, bool z, bool y) override { x_nhwc_ = x, z_nhwc_ = z, y_nhwc_ = y; }

  Result<bool> run(KernelContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& w = ctx.in(1);
    Tensor& y = ctx.out(0);
    const bool nhwc = x_nhwc_ || z_nhwc_ || y_nhwc_;
    if (x.rank() != 4 || w.rank() != 4) {  // 1-D and 3-D convolutions: the reference
      if (nhwc) return Status::Internal("{}: a channels-last convolution of rank {}", ctx.node.name, x.rank());
      return false;
    }
    GPUOPT_ASSIGN_OR_RETURN(nn::Window win, nn::conv_window(ctx, x.shape(), w.shape()));
    Geometry g{};
    g.N = x.dim(0), g.C = x.dim(1), g.H = x.dim(2), g.W = x.dim(3), g.M = w.dim(0);
    g.G = ctx.node.attr_i("group", 1);
    g.Cg = g.C / g.G, g.Mg = g.M / g.G;
    g.KH = win.kernel[0], g.KW = win.kernel[1], g.OH = win.out[0], g.OW = win.out[1];
    g.sh = win.strides[0], g.sw = win.strides[1], g.ph = win.pad_begin[0], g.pw = win.pad_begin[1];
    g.dh = win.dilations[0], g.dw = win.dilations[1];
    const float* bias = ctx.has_input(2) ? ctx.in(2).data<float>() : nullptr;
    const float* z = ctx.has_input(3) ? ctx.in(3).data<float>() : nullptr;
    if ((z && ctx.in(3).shape() != y.shape()) || (bias && ctx.in(2).numel() != g.M)) {
      if (nhwc) return Status::Internal("{}: a channels-last convolution's bias or residual shape", ctx.node.name);
      return false;  // the reference reports it
    }
    const float* X = x.data<float>();
    const float* Wt = w.data<float>();
    float* Y = y.data<float>();
    // oneDNN: every kernel size, but a 1x1 one only with an NHWC side (with NCHW on both, its
    // conversions cost more than it gains over sgemm on the input as it is: perf-notes.md).
    if (dnnl_ && g.G == 1 && (nhwc || g.taps() > 1)) {
      const ConvShape s{g.N,  g.C,  g.H,  g.W,  g.M,  g.KH,           g.KW,           g.OH, g.OW,
                        g.sh, g.sw, g.ph, g.pw, win.pad_end[0], win.pad_end[1], g.dh, g.dw};
      if (dnnl_->run(s, Wt, ConvIo{X, x_nhwc_, bias, z, z_nhwc_, Y, y_nhwc_})) return true;
    }
    if (!nhwc) return nchw(g, X, Wt, bias, z, Y);
    // Channels-last values oneDNN did not take: through NCHW copies.
    auto to_nchw = [](const float* t, int64_t n, int64_t c, int64_t hw, std::vector<float>& out) {
      out.resize(static_cast<size_t>(n * c * hw));
      parallel(n, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) nhwc_to_nchw(t + i * c * hw, out.data() + i * c * hw, c, hw, 0, hw);
      });
      return out.data();
    };
    std::vector<float> xt, zt, yt;
    if (x_nhwc_) X = to_nchw(X, g.N, g.C, g.H * g.W, xt);
    if (z && z_nhwc_) z = to_nchw(z, g.N, g.M, g.out(), zt);
    float* Yn = Y;
    if (y_nhwc_) {
      yt.resize(static_cast<size_t>(g.N * g.M * g.out()));
      Yn = yt.data();
    }
    if (!nchw(g, X, Wt, bias, z, Yn)) return Status::Internal("{}: a channels-last convolution declined", ctx.node.name);
    if (y_nhwc_)
      parallel(g.N, 1, [&](int64_t i0, int64_t i1) {
        const int64_t hw = g.out();
        for (int64_t i = i0; i < i1; ++i) nchw_to_nhwc(Yn + i * g.M * hw, Y + i * g.M * hw, g.M, hw, 0, hw);
      });
    return true;
  }

 private:
  // The convolution on NCHW tensors: depthwise loops, or im2col + sgemm (see the file comment).
  bool nchw(const Geometry& g, const float* X, const float* Wt, const float* bias, const float* z, float* Y) const {
    const int64_t O = g.out();
    // Bias, Z and activation over rows [m0, m1) (output channels of image n), columns [o0, o1).
    auto epilogue = [&](int64_t n, int64_t m0, int64_t m1, int64_t o0, int64_t o1) {
      for (int64_t m = m0; m < m1; ++m) {
        float* yr = Y + (n * g.M + m) * O + o0;
        const int64_t len = o1 - o0;
        if (bias) {
          const float b = bias[m];
          for (int64_t i = 0; i < len; ++i) yr[i] += b;
        }
        if (z) {
          const float* zr = z + (n * g.M + m) * O + o0;
          for (int64_t i = 0; i < len; ++i) yr[i] += zr[i];
        }
        apply_activation(act_, yr, len);
      }
    };
    if (g.Cg == 1) {  // depthwise (channel multiplier Mg): one output plane per unit
      parallel(g.N * g.M, 1, [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t n = u / g.M, m = u % g.M;
          depthwise_plane(g, X + (n * g.C + m / g.Mg) * g.H * g.W, Wt + m * g.taps(), Y + u * O);
          epilogue(n, m, m + 1, 0, O);
        }
      });
      return true;
    }
    const int64_t rows = g.Cg * g.taps();
    // Tiles of output positions per image: im2col tiles of about 1 MiB (L2-sized), at least 64
    // columns; a 1x1 stride-1 kernel reads the input as it is, one tile per image unless the
    // threads need more.
    const int threads = run_threads();
    const int64_t per = g.N * g.G;  // (image, group) pairs
    const int64_t cap = std::max<int64_t>(64, (int64_t{1} << 18) / std::max<int64_t>(rows, 1));
    int64_t tiles = g.pointwise() ? 1 : (O + cap - 1) / cap;
    // Equal shares: fewer units than threads get more tiles (down to 64 columns); a few units per
    // thread are rounded up to a whole number per thread (a 14x14 image in tiles of 128 + 68
    // columns kept one of two threads idle a third of the time).
    if (threads > 1) {  // 1x1 too: each thread's GEMM then its epilogue on its own columns, in cache
      if (per * tiles < threads)
        tiles = std::max<int64_t>(tiles, std::min((threads + per - 1) / per, (O + 63) / 64));
      else if (per * tiles < 8 * threads && per * tiles % threads != 0)
        tiles = ((per * tiles + threads - 1) / threads * threads + per - 1) / per;
    }
    const int64_t tile = (O + tiles - 1) / tiles;
    tiles = (O + tile - 1) / tile;
    const int64_t units = g.N * g.G * tiles;
    auto unit = [&](int64_t u, std::vector<float>& col, bool split_gemm) {
      const int64_t n = u / (g.G * tiles), grp = u / tiles % g.G, t = u % tiles;
      const int64_t o0 = t * tile, o1 = std::min(O, o0 + tile);
      const float* xg = X + (n * g.C + grp * g.Cg) * g.H * g.W;
      const float* B;
      int64_t ldb;
      if (g.pointwise()) {
        B = xg + o0;
        ldb = O;
      } else {
        col.resize(static_cast<size_t>(rows * (o1 - o0)));
        im2col(g, xg, o0, o1, col.data());
        B = col.data();
        ldb = o1 - o0;
      }
      float* yt = Y + (n * g.M + grp * g.Mg) * O + o0;
      (split_gemm ? sgemm : sgemm_serial)(false, false, g.Mg, o1 - o0, rows, 1.0f, Wt + grp * g.Mg * rows, rows, B,
                                          ldb, 0.0f, yt, O);
      if (!split_gemm) epilogue(n, grp * g.Mg, (grp + 1) * g.Mg, o0, o1);
      return std::pair<int64_t, int64_t>{n, grp};
    };
    if (units >= threads) {
      parallel(units, 1, [&](int64_t u0, int64_t u1) {
        std::vector<float> col;
        for (int64_t u = u0; u < u1; ++u) unit(u, col, false);
      });
    } else {  // one unit at a time, its GEMM split over the output channels by sgemm
      std::vector<float> col;
      for (int64_t u = 0; u < units; ++u) {
        const auto nu = unit(u, col, true);
        const int64_t n = nu.first, grp = nu.second;  // (a lambda may not capture a structured binding on clang < 16)
        const int64_t o0 = u % tiles * tile, o1 = std::min(O, o0 + tile);
        parallel(g.Mg, 4, [&](int64_t m0, int64_t m1) { epilogue(n, grp * g.Mg + m0, grp * g.Mg + m1, o0, o1); });
      }
    }
    return true;
  }

  // One output plane of a depthwise convolution (no bias): out[oh, ow] = sum over taps.
  static void depthwise_plane(const Geometry& g, const float* x, const float* w, float* out) {
    std::fill(out, out + g.out(), 0.0f);
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const float wv = w[kh * g.KW + kw];
        const int64_t off_w = kw * g.dw - g.pw;
        // Valid ow: 0 <= ow * sw + off_w < W.
        const int64_t lo = std::max<int64_t>(0, (-off_w + g.sw - 1) / g.sw);
        const int64_t hi = std::min<int64_t>(g.OW, off_w >= g.W ? 0 : (g.W - 1 - off_w) / g.sw + 1);
        if (lo >= hi) continue;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const float* row = x + ih * g.W + off_w;
          float* o = out + oh * g.OW;
          if (g.sw == 1)
            for (int64_t ow = lo; ow < hi; ++ow) o[ow] += wv * row[ow];
          else
            for (int64_t ow = lo; ow < hi; ++ow) o[ow] += wv * row[ow * g.sw];
        }
      }
  }

  Activation act_;
  std::unique_ptr<DnnlConv> dnnl_;  // null: no oneDNN in this build, or weights not constant
  bool x_nhwc_ = false, z_nhwc_ = false, y_nhwc_ = false;  // plan_channels_last()
};

}  // namespace

std::unique_ptr<FastKernel> make_conv_kernel(const Node& node, const Graph& graph) {
  if (node.op != Op::Conv && node.op != Op::FusedConv) return nullptr;
  if (node.inputs.size() < 2) return nullptr;
  for (ValueId v : node.inputs)
    if (v != kNoValue && !is_f32(graph, v)) return nullptr;
  if (node.outputs.empty() || !is_f32(graph, node.outputs[0])) return nullptr;
  Activation act;
  if (node.op == Op::FusedConv) {
    auto a = conv_activation(node);
    if (!a.ok()) return nullptr;
    act = *a;
  }
  // oneDNN reorders the weights once, so only constant ones (nearly always: initializers) go there.
  std::unique_ptr<DnnlConv> dnnl;
  const Value& w = graph.value(node.inputs[1]);
  if (w.constant && w.constant->rank() == 4 && node.attr_i("group", 1) == 1) dnnl = DnnlConv::make(w.constant->shape(), act);
  return std::make_unique<ConvKernel>(act, std::move(dnnl));
}

}  // namespace gpuopt::cpu_fast
