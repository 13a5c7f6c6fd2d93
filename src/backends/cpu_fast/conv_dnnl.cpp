// oneDNN convolutions (see conv_dnnl.h). Per input extent and thread split, one primitive for one
// image and Mp = M / parts output channels, created once with oneDNN's threads at one (its
// OpenMP runtime then never starts a team: every call runs on the gpuopt pool thread that made
// it); the weights of each part reordered once into the primitive's layout.
#include "backends/cpu_fast/conv_dnnl.h"

#include <atomic>

#ifdef GPUOPT_HAVE_DNNL
#include "backends/cpu_fast/dnnl_util.h"
#include "backends/cpu_fast/fast_kernel.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

// libgomp, which oneDNN's build uses: the calling thread's OpenMP thread count (0 spawned).
extern "C" void omp_set_num_threads(int n);
#endif

namespace gpuopt::cpu_fast {
namespace {
std::atomic<uint64_t> g_dnnl_calls{0};
}  // namespace

uint64_t dnnl_conv_calls() {
  return g_dnnl_calls.load();
}

#ifndef GPUOPT_HAVE_DNNL
bool have_dnnl() {
  return false;
}
std::string dnnl_version() {
  return "";
}
std::unique_ptr<DnnlConv> DnnlConv::make(const std::vector<int64_t>&) {
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

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Where a tensor's channels live, as the block b of nChw{b}c: 1 for NCHW, 8 or 16, or the
// channel count for NHWC (one block); 0: another layout.
int64_t block_of(const memory::desc& d, const memory::dims& dims) {
  const auto f32 = memory::data_type::f32;
  if (d == memory::desc(dims, f32, Tag::nchw)) return 1;
  if (d == memory::desc(dims, f32, Tag::nhwc)) return dims[1];
  if (d == memory::desc(dims, f32, Tag::nChw16c)) return 16;
  if (d == memory::desc(dims, f32, Tag::nChw8c)) return 8;
  return 0;
}

// Positions [i0, i1) of one image's C channels (C a multiple of b) from NCHW to nChw{b}c and back;
// hw = H * W. In chunks of 64 positions, so the b rows read (or written) at once stay in cache.
void to_blocked(const float* src, float* dst, int64_t C, int64_t b, int64_t hw, int64_t i0, int64_t i1) {
  for (int64_t cb = 0; cb < C / b; ++cb) {
    float* d = dst + cb * hw * b;
    const float* s = src + cb * b * hw;
    for (int64_t j0 = i0; j0 < i1; j0 += 64) {
      const int64_t j1 = std::min(i1, j0 + 64);
      for (int64_t i = j0; i < j1; ++i)
        for (int64_t c = 0; c < b; ++c) d[i * b + c] = s[c * hw + i];
    }
  }
}
void from_blocked(const float* src, float* dst, int64_t C, int64_t b, int64_t hw) {
  for (int64_t cb = 0; cb < C / b; ++cb) {
    const float* s = src + cb * hw * b;
    float* d = dst + cb * b * hw;
    for (int64_t j0 = 0; j0 < hw; j0 += 64) {
      const int64_t j1 = std::min(hw, j0 + 64);
      for (int64_t c = 0; c < b; ++c)
        for (int64_t i = j0; i < j1; ++i) d[c * hw + i] = s[i * b + c];
    }
  }
}

}  // namespace

float* aligned(std::vector<float>& v, int64_t n) {
  v.resize(static_cast<size_t>(n) + 16);
  const auto a = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - a % 64) % 64) / sizeof(float);
}

namespace {

struct Prim {
  dnnl::convolution_forward conv;
  memory::desc src, dst, scratch;
  int64_t src_block = 0, dst_block = 0;
  std::vector<memory> weights;  // per part, in the primitive's layout
};

class DnnlConvImpl final : public DnnlConv {
 public:
  bool run(const ConvShape& s, const float* x, const float* w, float* y,
           const std::function<void(int64_t, int64_t, int64_t)>& epilogue) override {
    // Parts: whole images per thread when there are enough, else output-channel slices of 16.
    const int threads = run_threads();
    int64_t parts = 1;
    if (s.N < threads && s.M % (16 * threads) == 0) parts = threads;
    Prim* p = prim(s, parts, w);
    if (!p) return false;
    const int64_t Mp = s.M / parts, hw = s.H * s.W, ohw = s.OH * s.OW;
    // The input in the primitive's layout. Split by channels (N < threads): all images first,
    // by chunks of positions over the threads, into the calling thread's buffer; else each unit
    // (one image) converts its own into a buffer of its thread, one image in size.
    const bool blocked_in = p->src_block > 1, shared_in = blocked_in && parts > 1;
    const float* xb = x;
    if (shared_in) {
      thread_local std::vector<float> buf;
      float* const bp = aligned(buf, s.N * s.C * hw);  // this thread's (the pool threads' `buf` are theirs)
      const int64_t chunks = (hw + 255) / 256;         // 256 positions per unit
      parallel(s.N * chunks, 1, [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t n = u / chunks, i0 = u % chunks * 256, i1 = std::min(hw, i0 + 256);
          to_blocked(x + n * s.C * hw, bp + n * s.C * hw, s.C, p->src_block, hw, i0, i1);
        }
      });
      xb = bp;
    }
    parallel(s.N * parts, 1, [&](int64_t u0, int64_t u1) {
      dnnl::stream& strm = thread_stream();
      thread_local std::vector<float> in, out, scratch;
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t n = u / parts, part = u % parts;
        const float* src = xb + n * s.C * hw;
        if (blocked_in && !shared_in) {
          float* const ib = aligned(in, s.C * hw);
          to_blocked(x + n * s.C * hw, ib, s.C, p->src_block, hw, 0, hw);
          src = ib;
        }
        float* yp = y + (n * s.M + part * Mp) * ohw;
        float* dst = yp;
        if (p->dst_block > 1) {
          dst = aligned(out, Mp * ohw);
        }
        memory src_m(p->src, cpu_engine(), const_cast<float*>(src));
        memory dst_m(p->dst, cpu_engine(), dst);
        memory scr_m(p->scratch, cpu_engine(),
                     aligned(scratch, static_cast<int64_t>(p->scratch.get_size() / sizeof(float) + 1)));
        p->conv.execute(strm, {{DNNL_ARG_SRC, src_m},
                               {DNNL_ARG_WEIGHTS, p->weights[static_cast<size_t>(part)]},
                               {DNNL_ARG_DST, dst_m},
                               {DNNL_ARG_SCRATCHPAD, scr_m}});
        strm.wait();
        if (p->dst_block > 1) from_blocked(dst, yp, Mp, p->dst_block, ohw);
        epilogue(n, part * Mp, (part + 1) * Mp);
      }
    });
    g_dnnl_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  // The primitive for this call's extents and split, made (and its weights reordered) once.
  Prim* prim(const ConvShape& s, int64_t parts, const float* w) {
    const auto key = std::make_tuple(s.H, s.W, s.sh, s.sw, s.ph0, s.pw0, s.ph1, s.pw1, s.dh, s.dw, parts);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<Prim> made = create(s, parts, w);
    Prim* r = made.get();
    cache_.emplace(key, std::move(made));  // nullptr too: that shape stays on the caller's path
    return r;
  }

  static std::unique_ptr<Prim> create(const ConvShape& s, int64_t parts, const float* w) {
    try {
      dnnl::stream& strm = thread_stream();  // also: oneDNN's threads at one on this thread
      const int64_t Mp = s.M / parts;
      const memory::dims src{1, s.C, s.H, s.W}, wts{Mp, s.C, s.KH, s.KW}, dst{1, Mp, s.OH, s.OW};
      const auto f32 = memory::data_type::f32;
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::convolution_forward::primitive_desc pd(
          cpu_engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          memory::desc(src, f32, Tag::any), memory::desc(wts, f32, Tag::any), memory::desc(dst, f32, Tag::any),
          {s.sh, s.sw}, {s.dh - 1, s.dw - 1}, {s.ph0, s.pw0}, {s.ph1, s.pw1}, attr);
      auto p = std::make_unique<Prim>();
      p->src = pd.src_desc();
      p->dst = pd.dst_desc();
      p->scratch = pd.scratchpad_desc();
      p->src_block = block_of(p->src, src);
      p->dst_block = block_of(p->dst, dst);
      // Only its channels-last / blocked kernels pay (the plain-layout one is a GEMM like ours);
      // padded channel blocks are not handled.
      const std::string impl = pd.impl_info_str();
      if (p->src_block == 0 || p->dst_block == 0 || s.C % p->src_block != 0 || Mp % p->dst_block != 0 ||
          p->dst_block == 1 || impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos)
        return nullptr;
      p->conv = dnnl::convolution_forward(pd);
      for (int64_t part = 0; part < parts; ++part) {
        memory user({wts, f32, Tag::oihw}, cpu_engine(), const_cast<float*>(w + part * Mp * s.C * s.KH * s.KW));
        memory mine(pd.weights_desc(), cpu_engine());
        dnnl::reorder(user, mine).execute(strm, user, mine);
        p->weights.push_back(mine);
      }
      strm.wait();
      return p;
    } catch (const dnnl::error&) {
      return nullptr;  // no oneDNN kernel for this shape: the caller's path
    }
  }

  std::mutex mu_;
  std::map<
      std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>,
      std::unique_ptr<Prim> >
      cache_;
};

}  // namespace

std::unique_ptr<DnnlConv> DnnlConv::make(const std::vector<int64_t>& w) {
  if (w.size() != 4 || (w[2] == 1 && w[3] == 1)) return nullptr;  // 1x1: see conv_dnnl.h
  return std::make_unique<DnnlConvImpl>();
}
#endif

}  // namespace gpuopt::cpu_fast
