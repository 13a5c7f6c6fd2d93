// oneDNN convolutions (see conv_dnnl.h). A call is cut into units of one image's slab of output
// rows; each slab geometry (input rows, top and bottom padding) has its own primitive, created
// once with oneDNN's threads at one (its OpenMP runtime then never starts a team: every call runs
// on the gpuopt pool thread that executes it), with src, dst and residual NHWC and the weights in
// the layout the primitive picks, reordered once per layout.
#include "backends/cpu_fast/conv_dnnl.h"

#include <algorithm>
#include <atomic>

#ifdef GPUOPT_HAVE_DNNL
#include "backends/cpu_fast/dnnl_util.h"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

// libgomp, which oneDNN's build uses: the calling thread's OpenMP thread count (0 spawned).
extern "C" void omp_set_num_threads(int n);
#endif

namespace gpuopt::cpu_fast {
namespace {
std::atomic<uint64_t> g_dnnl_calls{0};
constexpr int64_t kTile = 16;  // the transposes' square tiles
}  // namespace

uint64_t dnnl_conv_calls() {
  return g_dnnl_calls.load();
}

void nchw_to_nhwc(const float* src, float* dst, int64_t C, int64_t hw, int64_t p0, int64_t p1) {
  for (int64_t pb = p0; pb < p1; pb += kTile) {
    const int64_t pe = std::min(p1, pb + kTile);
    for (int64_t cb = 0; cb < C; cb += kTile) {
      const int64_t ce = std::min(C, cb + kTile);
      for (int64_t c = cb; c < ce; ++c) {
        const float* s = src + c * hw;
        for (int64_t p = pb; p < pe; ++p) dst[(p - p0) * C + c] = s[p];
      }
    }
  }
}

void nhwc_to_nchw(const float* src, float* dst, int64_t C, int64_t hw, int64_t p0, int64_t p1) {
  for (int64_t cb = 0; cb < C; cb += kTile) {
    const int64_t ce = std::min(C, cb + kTile);
    for (int64_t pb = p0; pb < p1; pb += kTile) {
      const int64_t pe = std::min(p1, pb + kTile);
      for (int64_t c = cb; c < ce; ++c) {
        float* d = dst + c * hw;
        for (int64_t p = pb; p < pe; ++p) d[p] = src[(p - p0) * C + c];
      }
    }
  }
}

#ifndef GPUOPT_HAVE_DNNL
bool have_dnnl() {
  return false;
}
std::string dnnl_version() {
  return "";
}
std::unique_ptr<DnnlConv> DnnlConv::make(const std::vector<int64_t>&, const Activation&) {
  return nullptr;
}
#else
bool have_dnnl() {
  return true;
}
std::string dnnl_version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local bool once = (omp_set_num_threads(1), true);
  (void)once;
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

float* aligned(std::vector<float>& v, int64_t n) {
  v.resize(static_cast<size_t>(n) + 16);
  const auto a = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - a % 64) % 64) / sizeof(float);
}

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Output rows [oh0, oh1) of one image read input rows [ih0, ih1), with pt / pb rows of zero
// padding above and below.
struct Slab {
  int64_t oh0, oh1, ih0, ih1, pt, pb;
};
Slab slab(const ConvShape& s, int64_t oh0, int64_t oh1) {
  const int64_t a = oh0 * s.sh - s.ph0, b = (oh1 - 1) * s.sh - s.ph0 + (s.KH - 1) * s.dh + 1;
  const int64_t ih0 = std::max<int64_t>(0, a), ih1 = std::min(s.H, b);
  return {oh0, oh1, ih0, ih1, ih0 - a, std::max<int64_t>(0, b - ih1)};
}

struct Prim {
  dnnl::convolution_forward conv;
  memory::desc scratch;
  const memory* weights = nullptr;  // in the primitive's layout (shared by like primitives)
};

class DnnlConvImpl final : public DnnlConv {
 public:
  DnnlConvImpl(std::vector<int64_t> w, const Activation& act) : w_(std::move(w)), act_(act) {
    post_act_ = act.kind != Act::kNone && act.kind != Act::kRelu && act.kind != Act::kLeakyRelu && act.kind != Act::kClip;
  }

  bool run(const ConvShape& s, const float* w, const ConvIo& io) override {
    if (s.C != w_[1] || s.M != w_[0] || s.KH != w_[2] || s.KW != w_[3] || s.OH <= 0 || s.OW <= 0) return false;
    // Units: whole images when there are enough for every thread in equal shares; else each
    // image in R slabs of output rows (at 16 threads and batch 1, one slab per thread).
    const int threads = run_threads();
    int64_t R = 1;
    if (s.N < threads)
      R = (threads + s.N - 1) / s.N;
    else if (s.N % threads != 0 && s.N < 8 * threads)
      R = (4 * threads + s.N - 1) / s.N;
    R = std::min(R, s.OH);
    const int64_t rows = (s.OH + R - 1) / R;
    R = (s.OH + rows - 1) / rows;
    // Still fewer units than threads (a 7x7 output has 7 slabs): each slab also in Q slices of
    // Mp output channels (multiples of 16), each computed into a buffer of its own, then the
    // residual and activation added there and the slice copied out.
    int64_t Q = 1, Mp = s.M;
    if (s.N * R < threads && s.M >= 32) {
      Q = std::min((threads + s.N * R - 1) / (s.N * R), s.M / 16);
      Mp = (s.M / Q + 15) / 16 * 16;
      Q = (s.M + Mp - 1) / Mp;
      if (Q == 1) Mp = s.M;
    }
    std::vector<const Prim*> prims;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t q = 0; q < Q; ++q) {
        const Prim* p = prim(s, slab(s, r * rows, std::min(s.OH, (r + 1) * rows)), io, w, q * Mp,
                             std::min(Mp, s.M - q * Mp));
        if (!p) return false;  // nothing written yet
        prims.push_back(p);
      }
    const int64_t hw = s.H * s.W, ohw = s.OH * s.OW;
    parallel(s.N * R * Q, 1, [&](int64_t u0, int64_t u1) {
      dnnl::stream& strm = thread_stream();
      thread_local std::vector<float> in, res, out, scratch;
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t n = u / (R * Q), r = u / Q % R, q = u % Q;
        const Slab sl = slab(s, r * rows, std::min(s.OH, (r + 1) * rows));
        const Prim& p = *prims[static_cast<size_t>(r * Q + q)];
        const int64_t o0 = sl.oh0 * s.OW, o1 = sl.oh1 * s.OW;  // output positions of the unit
        const int64_t m0 = q * Mp, mc = std::min(Mp, s.M - m0);
        const float* src = io.x + (n * hw + sl.ih0 * s.W) * s.C;
        if (!io.x_nhwc) {
          float* b = aligned(in, (sl.ih1 - sl.ih0) * s.W * s.C);
          nchw_to_nhwc(io.x + n * s.C * hw, b, s.C, hw, sl.ih0 * s.W, sl.ih1 * s.W);
          src = b;
        }
        float* dst = io.y_nhwc && Q == 1 ? io.y + (n * ohw + o0) * s.M : aligned(out, (o1 - o0) * mc);
        memory src_m(prim_src(s, sl), cpu_engine(), const_cast<float*>(src));
        memory dst_m(prim_dst(s, sl, mc), cpu_engine(), dst);
        memory scr_m(p.scratch, cpu_engine(),
                     aligned(scratch, static_cast<int64_t>(p.scratch.get_size() / sizeof(float) + 1)));
        std::unordered_map<int, memory> args{
            {DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, *p.weights}, {DNNL_ARG_DST, dst_m}, {DNNL_ARG_SCRATCHPAD, scr_m}};
        if (io.bias) args.emplace(DNNL_ARG_BIAS, memory({{mc}, memory::data_type::f32, Tag::x}, cpu_engine(),
                                                        const_cast<float*>(io.bias + m0)));
        if (Q > 1) {
          p.conv.execute(strm, args);
          strm.wait();
          finish_slice(s, io, dst, n, o0, o1, m0, mc);
          continue;
        }
        if (io.z) {
          const float* zp = io.z + (n * ohw + o0) * s.M;
          if (!io.z_nhwc) {
            float* b = aligned(res, (o1 - o0) * s.M);
            nchw_to_nhwc(io.z + n * s.M * ohw, b, s.M, ohw, o0, o1);
            zp = b;
          }
          args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                       memory(prim_dst(s, sl, s.M), cpu_engine(), const_cast<float*>(zp)));
        }
        p.conv.execute(strm, args);
        strm.wait();
        if (post_act_) apply_activation(act_, dst, (o1 - o0) * s.M);
        if (!io.y_nhwc) nhwc_to_nchw(dst, io.y + n * s.M * ohw, s.M, ohw, o0, o1);
      }
    });
    g_dnnl_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  static memory::desc prim_src(const ConvShape& s, const Slab& sl) {
    return {{1, s.C, sl.ih1 - sl.ih0, s.W}, memory::data_type::f32, Tag::nhwc};
  }
  static memory::desc prim_dst(const ConvShape& s, const Slab& sl, int64_t mc) {
    return {{1, mc, sl.oh1 - sl.oh0, s.OW}, memory::data_type::f32, Tag::nhwc};
  }

  // A slice's output (positions [o0, o1), channels [m0, m0 + mc) of image n, NHWC in `t`): plus
  // the residual, the activation, then into y.
  void finish_slice(const ConvShape& s, const ConvIo& io, float* t, int64_t n, int64_t o0, int64_t o1, int64_t m0,
                    int64_t mc) const {
    const int64_t ohw = s.OH * s.OW, np = o1 - o0;
    if (io.z && io.z_nhwc)
      for (int64_t p = 0; p < np; ++p) {
        const float* zr = io.z + (n * ohw + o0 + p) * s.M + m0;
        for (int64_t j = 0; j < mc; ++j) t[p * mc + j] += zr[j];
      }
    if (io.z && !io.z_nhwc)
      for (int64_t j = 0; j < mc; ++j) {
        const float* zr = io.z + (n * s.M + m0 + j) * ohw + o0;
        for (int64_t p = 0; p < np; ++p) t[p * mc + j] += zr[p];
      }
    apply_activation(act_, t, np * mc);
    if (io.y_nhwc) {
      for (int64_t p = 0; p < np; ++p)
        std::copy(t + p * mc, t + (p + 1) * mc, io.y + (n * ohw + o0 + p) * s.M + m0);
    } else {
      nhwc_to_nchw(t, io.y + (n * s.M + m0) * ohw, mc, ohw, o0, o1);
    }
  }

  // The primitive for this slab geometry, made (and its weights reordered) once; nullptr when
  // oneDNN has only its reference or GEMM-based kernels for it (the caller's path is as fast).
  // Output channels [m0, m0 + mc): all of them carry the residual and activation as post-ops,
  // a slice only the bias.
  const Prim* prim(const ConvShape& s, const Slab& sl, const ConvIo& io, const float* w, int64_t m0, int64_t mc) {
    const auto key = std::make_tuple(sl.ih1 - sl.ih0, sl.oh1 - sl.oh0, s.W, s.OW, sl.pt, sl.pb, s.pw0, s.pw1, s.sh,
                                     s.sw, s.dh, s.dw, io.bias != nullptr, io.z != nullptr, m0, mc);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<Prim> made;
    if (sl.ih1 > sl.ih0) made = create(s, sl, io, w, m0, mc);
    const Prim* r = made.get();
    cache_.emplace(key, std::move(made));  // nullptr too: that shape stays on the caller's path
    return r;
  }

  std::unique_ptr<Prim> create(const ConvShape& s, const Slab& sl, const ConvIo& io, const float* w, int64_t m0,
                               int64_t mc) {
    try {
      dnnl::stream& strm = thread_stream();  // also: oneDNN's threads at one on this thread
      const auto f32 = memory::data_type::f32;
      const memory::dims wts{mc, s.C, s.KH, s.KW};
      const bool all = mc == s.M;
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops po;
      if (all && io.z) po.append_binary(dnnl::algorithm::binary_add, prim_dst(s, sl, mc));
      if (all && act_.kind == Act::kRelu) po.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      if (all && act_.kind == Act::kLeakyRelu) po.append_eltwise(dnnl::algorithm::eltwise_relu, act_.a, 0.0f);
      if (all && act_.kind == Act::kClip) po.append_eltwise(dnnl::algorithm::eltwise_clip, act_.a, act_.b);
      attr.set_post_ops(po);
      const memory::desc bias = io.bias ? memory::desc({mc}, f32, Tag::x) : memory::desc();
      dnnl::convolution_forward::primitive_desc pd(
          cpu_engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, prim_src(s, sl),
          memory::desc(wts, f32, Tag::any), bias, prim_dst(s, sl, mc), {s.sh, s.sw}, {s.dh - 1, s.dw - 1},
          {sl.pt, s.pw0}, {sl.pb, s.pw1}, attr);
      // Only its direct and brgemm kernels pay (its GEMM-based one is im2col + a GEMM like ours).
      const std::string impl = pd.impl_info_str();
      if (impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos) return nullptr;
      auto p = std::make_unique<Prim>();
      p->conv = dnnl::convolution_forward(pd);
      p->scratch = pd.scratchpad_desc();
      for (const auto& [desc, first, mem] : weights_)
        if (first == m0 && desc == pd.weights_desc()) p->weights = mem.get();
      if (!p->weights) {
        memory user({wts, f32, Tag::oihw}, cpu_engine(), const_cast<float*>(w + m0 * s.C * s.KH * s.KW));
        auto mine = std::make_unique<memory>(pd.weights_desc(), cpu_engine());
        dnnl::reorder(user, *mine).execute(strm, user, *mine);
        strm.wait();
        p->weights = mine.get();
        weights_.emplace_back(pd.weights_desc(), m0, std::move(mine));
      }
      return p;
    } catch (const dnnl::error&) {
      return nullptr;  // no oneDNN kernel for this shape: the caller's path
    }
  }

  std::vector<int64_t> w_;
  Activation act_;
  bool post_act_ = false;  // an activation oneDNN's post-ops do not carry: applied after
  std::mutex mu_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      int64_t, int64_t, bool, bool, int64_t, int64_t>,
           std::unique_ptr<Prim> >
      cache_;
  std::vector<std::tuple<memory::desc, int64_t, std::unique_ptr<memory> > > weights_;  // (layout, first channel)
};

}  // namespace

std::unique_ptr<DnnlConv> DnnlConv::make(const std::vector<int64_t>& w, const Activation& act) {
  if (w.size() != 4) return nullptr;
  return std::make_unique<DnnlConvImpl>(w, act);
}
#endif

}  // namespace gpuopt::cpu_fast
