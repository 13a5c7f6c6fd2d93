// oneDNN matmul with packed constant weights (see gemm_dnnl.h). A call is cut by gemm_parts into
// parts of at least 16 rows; each column slice of B is packed once, and one primitive per part
// shape (rows x width) reads it.
#include "backends/cpu_fast/gemm_dnnl.h"

#include <atomic>

#ifdef GPUOPT_HAVE_DNNL
#include "backends/cpu_fast/dnnl_util.h"
#include "backends/cpu_fast/fast_kernel.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#endif

namespace gpuopt::cpu_fast {
namespace {
std::atomic<uint64_t> g_calls{0};
}  // namespace

uint64_t dnnl_matmul_calls() {
  return g_calls.load();
}

#ifndef GPUOPT_HAVE_DNNL
std::unique_ptr<DnnlMatmul> DnnlMatmul::make(int64_t, int64_t, bool) {
  return nullptr;
}
#else
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

class DnnlMatmulImpl final : public DnnlMatmul {
 public:
  DnnlMatmulImpl(int64_t K, int64_t N, bool trans_b) : K_(K), N_(N), trans_b_(trans_b) {}

  bool run(int64_t M, const float* A, int64_t lda, const float* B, float* Y,
           const std::function<void(int64_t, int64_t, int64_t, int64_t)>& epilogue) override {
    const GemmParts g = gemm_parts(run_threads(), M, N_, K_, /*packed_b=*/true);
    if (M <= 0 || g.rows < 16 || lda != K_) return false;
    // Every part's primitive and packed column slice, made (and B packed) on the first call.
    const int64_t last_m = M - (g.row_parts - 1) * g.rows, last_n = N_ - (g.col_parts - 1) * g.cols;
    const Prim* prims[2][2];
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c)
        if (!(prims[r][c] = prim(r ? last_m : g.rows, c ? last_n : g.cols))) return false;
    std::vector<const Slice*> slices(static_cast<size_t>(g.col_parts));
    for (int64_t j = 0; j < g.col_parts; ++j) {
      slices[static_cast<size_t>(j)] = slice(j * g.cols, j + 1 == g.col_parts ? last_n : g.cols, B);
      if (!slices[static_cast<size_t>(j)]) return false;
    }
    parallel(g.parts(), 1, [&](int64_t p0, int64_t p1) {
      dnnl::stream& strm = thread_stream();
      thread_local std::vector<float> scratch, part;
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t i = p / g.col_parts, j = p % g.col_parts;
        const int64_t m0 = i * g.rows, m = std::min(g.rows, M - m0), n0 = j * g.cols, n = std::min(g.cols, N_ - n0);
        const Prim& pr = *prims[m != g.rows][n != g.cols];
        memory a(memory::desc({m, K_}, memory::data_type::f32, memory::dims{lda, 1}), cpu_engine(),
                 const_cast<float*>(A + m0 * lda));
        // A column part is computed dense (oneDNN's brgemm kernels want the row stride n) and
        // copied into Y: m x n floats against the part's m x n x K multiply-adds.
        float* dst = n == N_ ? Y + m0 * N_ : aligned(part, m * n);
        memory y(memory::desc({m, n}, memory::data_type::f32, Tag::ab), cpu_engine(), dst);
        memory s(pr.scratch, cpu_engine(),
                 aligned(scratch, static_cast<int64_t>(pr.scratch.get_size() / sizeof(float) + 1)));
        pr.mm.execute(strm, {{DNNL_ARG_SRC, a},
                             {DNNL_ARG_WEIGHTS, slices[static_cast<size_t>(j)]->packed},
                             {DNNL_ARG_DST, y},
                             {DNNL_ARG_SCRATCHPAD, s}});
        strm.wait();
        if (n != N_)
          for (int64_t r = 0; r < m; ++r) std::copy(dst + r * n, dst + (r + 1) * n, Y + (m0 + r) * N_ + n0);
        epilogue(m0, m0 + m, n0, n0 + n);
      }
    });
    g_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  struct Prim {
    dnnl::matmul mm;
    memory::desc scratch;
  };
  struct Slice {
    memory packed;  // B's columns [n0, n0 + n) in the packed layout of width n
  };

  // The primitive for m rows x n columns (nullptr when oneDNN has no packed kernel for it); the
  // first one of each width n fixes the packed layout every row count's primitive must share.
  const Prim* prim(int64_t m, int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = prims_.find({m, n});
    if (it != prims_.end()) return it->second.get();
    std::unique_ptr<Prim> made;
    try {
      const auto f32 = memory::data_type::f32;
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::matmul::primitive_desc pd(cpu_engine(), memory::desc({m, K_}, f32, Tag::ab),
                                      memory::desc({K_, n}, f32, Tag::any), memory::desc({m, n}, f32, Tag::ab), attr);
      const std::string impl = pd.impl_info_str();
      const bool packed = impl.find("ref") == std::string::npos && impl.find("gemm") == std::string::npos;
      auto layout = layouts_.find(n);
      if (packed && layout == layouts_.end()) layout = layouts_.emplace(n, pd.weights_desc()).first;
      if (packed && pd.weights_desc() == layout->second)
        made = std::make_unique<Prim>(Prim{dnnl::matmul(pd), pd.scratchpad_desc()});
    } catch (const dnnl::error&) {
      made.reset();  // no oneDNN kernel: the caller's sgemm
    }
    return prims_.emplace(std::make_pair(m, n), std::move(made)).first->second.get();
  }

  // B's columns [n0, n0 + n), packed once in width n's layout (nullptr: no primitive of width n
  // fixed a layout, or oneDNN failed).
  const Slice* slice(int64_t n0, int64_t n, const float* B) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slices_.find({n0, n});
    if (it != slices_.end()) return it->second.get();
    std::unique_ptr<Slice> made;
    auto layout = layouts_.find(n);
    if (layout != layouts_.end()) {
      try {
        dnnl::stream& strm = thread_stream();
        // B as stored is K x N (row stride N) or, trans_b, N x K: a view of the slice's K x n.
        const memory::dims strides = trans_b_ ? memory::dims{1, K_} : memory::dims{N_, 1};
        const float* base = trans_b_ ? B + n0 * K_ : B + n0;
        memory user(memory::desc({K_, n}, memory::data_type::f32, strides), cpu_engine(), const_cast<float*>(base));
        made = std::make_unique<Slice>(Slice{memory(layout->second, cpu_engine())});
        dnnl::reorder(user, made->packed).execute(strm, user, made->packed);
        strm.wait();
      } catch (const dnnl::error&) {
        made.reset();
      }
    }
    return slices_.emplace(std::make_pair(n0, n), std::move(made)).first->second.get();
  }

  int64_t K_, N_;
  bool trans_b_;
  std::mutex mu_;
  std::map<int64_t, memory::desc> layouts_;  // width -> its packed layout
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Prim> > prims_;    // (rows, width)
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Slice> > slices_;  // (first column, width)
};

}  // namespace

std::unique_ptr<DnnlMatmul> DnnlMatmul::make(int64_t K, int64_t N, bool trans_b) {
  if (K <= 0 || N <= 0) return nullptr;
  return std::make_unique<DnnlMatmulImpl>(K, N, trans_b);
}
#endif

}  // namespace gpuopt::cpu_fast
