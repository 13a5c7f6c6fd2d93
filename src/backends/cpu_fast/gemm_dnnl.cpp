// oneDNN matmul with packed constant weights (see gemm_dnnl.h). One primitive per row count
// (a call's rows split into parts of at least 16 per thread), all reading one packed B.
#include "backends/cpu_fast/gemm_dnnl.h"

#include <atomic>

#ifdef GPUOPT_HAVE_DNNL
#include "backends/cpu_fast/dnnl_util.h"
#include "backends/cpu_fast/fast_kernel.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
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
           const std::function<void(int64_t, int64_t)>& epilogue) override {
    const int threads = run_threads();
    if (M < 16 * threads || lda != K_) return false;
    const int64_t rows = (M + threads - 1) / threads;  // parts: `threads` of `rows` rows, the last fewer
    const int64_t parts = (M + rows - 1) / rows, last = M - (parts - 1) * rows;
    const Prim* full = prim(rows, B);
    const Prim* tail = last == rows ? full : prim(last, B);
    if (!full || !tail) return false;
    parallel(parts, 1, [&](int64_t p0, int64_t p1) {
      dnnl::stream& strm = thread_stream();
      thread_local std::vector<float> scratch;
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t m0 = p * rows, m = std::min(rows, M - m0);
        const Prim& pr = m == rows ? *full : *tail;
        memory a(memory::desc({m, K_}, memory::data_type::f32, Tag::ab), cpu_engine(),
                 const_cast<float*>(A + m0 * lda));
        memory y(memory::desc({m, N_}, memory::data_type::f32, Tag::ab), cpu_engine(), Y + m0 * N_);
        memory s(pr.scratch, cpu_engine(),
                 aligned(scratch, static_cast<int64_t>(pr.scratch.get_size() / sizeof(float) + 1)));
        pr.mm.execute(strm,
                      {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, *packed_}, {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, s}});
        strm.wait();
        epilogue(m0, m0 + m);
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

  // The primitive for m rows (nullptr when oneDNN has no packed kernel for it); the first one
  // made also packs B, in the layout every row count's primitive of these K, N uses.
  const Prim* prim(int64_t m, const float* B) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(m);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<Prim> made;
    try {
      const auto f32 = memory::data_type::f32;
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::matmul::primitive_desc pd(cpu_engine(), memory::desc({m, K_}, f32, Tag::ab),
                                      memory::desc({K_, N_}, f32, Tag::any), memory::desc({m, N_}, f32, Tag::ab), attr);
      const std::string impl = pd.impl_info_str();
      const bool packed = impl.find("ref") == std::string::npos && impl.find("gemm") == std::string::npos;
      if (packed && (!packed_ || pd.weights_desc() == packed_->get_desc())) {
        if (!packed_) {
          dnnl::stream& strm = thread_stream();
          memory user(memory::desc({K_, N_}, f32, trans_b_ ? Tag::ba : Tag::ab), cpu_engine(), const_cast<float*>(B));
          packed_ = std::make_unique<memory>(pd.weights_desc(), cpu_engine());
          dnnl::reorder(user, *packed_).execute(strm, user, *packed_);
          strm.wait();
        }
        made = std::make_unique<Prim>(Prim{dnnl::matmul(pd), pd.scratchpad_desc()});
      }
    } catch (const dnnl::error&) {
      made.reset();  // no oneDNN kernel: the caller's sgemm
    }
    const Prim* r = made.get();
    cache_.emplace(m, std::move(made));
    return r;
  }

  int64_t K_, N_;
  bool trans_b_;
  std::mutex mu_;
  std::unique_ptr<memory> packed_;
  std::map<int64_t, std::unique_ptr<Prim> > cache_;
};

}  // namespace

std::unique_ptr<DnnlMatmul> DnnlMatmul::make(int64_t K, int64_t N, bool trans_b) {
  if (K <= 0 || N <= 0) return nullptr;
  return std::make_unique<DnnlMatmulImpl>(K, N, trans_b);
}
#endif

}  // namespace gpuopt::cpu_fast
