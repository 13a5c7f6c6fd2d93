// The fast CPU kernels' shared parts: the per-run thread share, the sgemm wrapper (OpenBLAS,
// single-threaded per call, split over the gpuopt pool) and the f32 epilogue activations.
#include "backends/cpu_fast/fast_kernel.h"
#include "backends/cpu_fast/vec_math.h"
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#ifdef GPUOPT_HAVE_BLAS
#include <cblas.h>
// OpenBLAS (pthread and OpenMP builds): stops its worker threads, restarted on demand. Weak: a
// serial OpenBLAS has none to stop.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
#endif

namespace gpuopt::cpu_fast {
namespace {

std::atomic<int> g_active_runs{0};
std::atomic<uint64_t> g_fast_calls{0};
thread_local int t_threads = 0;  // 0: outside a fast run (all of the pool)

}  // namespace

uint64_t fast_kernel_calls() { return g_fast_calls.load(); }
void count_fast_kernel_call() { g_fast_calls.fetch_add(1, std::memory_order_relaxed); }

int run_threads() { return t_threads > 0 ? t_threads : cpu_threads(); }

RunScope::RunScope(int max_threads) : saved_(t_threads) {
  // The pool is shared by every session and server instance in the process: runs in flight
  // divide it, so N instances on P cores use P threads together, not N x P.
  const int active = g_active_runs.fetch_add(1) + 1;
  int n = std::max(1, cpu_threads() / std::max(1, active));
  if (max_threads > 0) n = std::min(n, max_threads);
  t_threads = n;
}

RunScope::~RunScope() {
  g_active_runs.fetch_sub(1);
  t_threads = saved_;
}

void parallel(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f) {
  parallel_for_max(n, min_chunk, run_threads(), f);
}

void init_blas() {
#ifdef GPUOPT_HAVE_BLAS
  static std::once_flag once;
  std::call_once(once, [] {
    // OpenBLAS starts its own pool when the library loads; gpuopt's pool splits the GEMMs, so
    // OpenBLAS runs each call on the calling thread and its idle threads are stopped (they
    // would otherwise sit beside GPUOPT_NUM_THREADS=1).
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
  });
#endif
}

void sgemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
#ifdef GPUOPT_HAVE_BLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
#else
  // Without OpenBLAS (a build that did not find it): plain loops, still f32 and vectorisable.
  for (int64_t m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    for (int64_t n = 0; n < N; ++n) c[n] = beta == 0.0f ? 0.0f : beta * c[n];
    for (int64_t k = 0; k < K; ++k) {
      const float a = alpha * (trans_a ? A[k * lda + m] : A[m * lda + k]);
      if (trans_b)
        for (int64_t n = 0; n < N; ++n) c[n] += a * B[n * ldb + k];
      else
        for (int64_t n = 0; n < N; ++n) c[n] += a * B[k * ldb + n];
    }
  }
#endif
}

GemmParts gemm_parts(int threads, int64_t M, int64_t N, int64_t K, bool packed_b) {
  GemmParts best;
  // Below ~2 MFLOP a split costs more than it gains.
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (threads > 1 && M > 0 && N > 0 && flops >= 2e6) {
    if (packed_b && threads <= 2 && M >= 16 * threads) {
      best.row_parts = threads;
    } else {
      // Data read, in units of K floats: each row part reads all of B's N columns, each column
      // part all of A's M rows.
      int64_t best_cost = 0;
      for (int64_t rp = 1; rp <= threads; ++rp) {
        if (rp > 1 && M < 16 * rp) break;
        const int64_t cp = std::max<int64_t>(1, std::min<int64_t>(threads / rp, N / 64));
        const int64_t cost = rp * N + cp * M;
        if (rp * cp > best.parts() || (rp * cp == best.parts() && cost < best_cost))
          best.row_parts = rp, best.col_parts = cp, best_cost = cost;
      }
    }
  }
  best.rows = std::max<int64_t>(1, (M + best.row_parts - 1) / best.row_parts);
  best.row_parts = std::max<int64_t>(1, (M + best.rows - 1) / best.rows);
  best.cols = std::max<int64_t>(1, (N + best.col_parts - 1) / best.col_parts);
  if (best.col_parts > 1) best.cols = std::min(N, (best.cols + 15) / 16 * 16);
  best.col_parts = std::max<int64_t>(1, (N + best.cols - 1) / best.cols);
  return best;
}

void for_each_gemm_part(int64_t M, int64_t N, int64_t K,
                        const std::function<void(int64_t, int64_t, int64_t, int64_t)>& f) {
  const GemmParts g = gemm_parts(run_threads(), M, N, K);
  parallel(g.parts(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t m0 = p / g.col_parts * g.rows, n0 = p % g.col_parts * g.cols;
      f(m0, std::min(M, m0 + g.rows), n0, std::min(N, n0 + g.cols));
    }
  });
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  for_each_gemm_part(M, N, K, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const float* Ap = trans_a ? A + m0 : A + m0 * lda;
    const float* Bp = trans_b ? B + n0 * ldb : B + n0;
    sgemm_serial(trans_a, trans_b, m1 - m0, n1 - n0, K, alpha, Ap, lda, Bp, ldb, beta, C + m0 * ldc + n0, ldc);
  });
}

bool is_f32(const Graph& graph, ValueId v) {
  return v != kNoValue && graph.value(v).info.dtype == DType::F32;
}

void apply_activation(const Activation& act, float* y, int64_t n) {
  switch (act.kind) {
    case Act::kNone: return;
    case Act::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      return;
    case Act::kGelu: vec::gelu_erf(y, y, n); return;
    case Act::kGeluTanh: vec::gelu_tanh(y, y, n); return;
    case Act::kSigmoid: vec::sigmoid(y, y, n); return;
    case Act::kTanh: vec::tanh(y, y, n); return;
    case Act::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= 0.0f ? y[i] : act.a * y[i];
      return;
    case Act::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], act.a), act.b);
      return;
    case Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.0f, std::min(1.0f, act.a * y[i] + act.b));
      return;
    case Act::kHardSwish:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * std::max(0.0f, std::min(1.0f, y[i] / 6.0f + 0.5f));
      return;
    case Act::kSwish: vec::swish(y, y, n); return;
  }
}

std::unique_ptr<FastKernel> make_fast_kernel(const Node& node, const Graph& graph) {
  using Maker = std::unique_ptr<FastKernel> (*)(const Node&, const Graph&);
  for (Maker m : {make_gemm_kernel, make_conv_kernel, make_attention_kernel, make_norm_kernel, make_elementwise_kernel})
    if (auto k = m(node, graph)) return k;
  return nullptr;
}

}  // namespace gpuopt::cpu_fast
