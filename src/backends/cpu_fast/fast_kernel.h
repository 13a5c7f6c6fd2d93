// The fast CPU backend's kernels (`--device cpu`): f32 MatMul/Gemm/Conv through single-threaded
// OpenBLAS sgemm calls split over the shared thread pool, attention, normalisation and
// elementwise loops in f32 that the compiler vectorises. The reference kernels
// (`--device cpu-ref`, src/ops/*) stay the oracle; a node no fast kernel claims, or a call whose
// runtime shapes a kernel does not take, runs the reference kernel on the same tensors.
//
//   std::unique_ptr<FastKernel> k = make_fast_kernel(node, graph);   // nullptr: the reference runs it
//   GPUOPT_ASSIGN_OR_RETURN(bool done, k->run(kctx));                // false: run the reference
#pragma once

#include "core/status.h"
#include "ir/graph.h"
#include "ir/op_table.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace gpuopt::cpu_fast {

// One node's kernel, made once at compile time (constant weights checked and laid out then).
class FastKernel {
 public:
  virtual ~FastKernel() = default;
  // Outputs are allocated with the inferred shapes. Returns false, having written nothing, when
  // this call's inputs are outside what the kernel handles (the reference runs it instead).
  virtual Result<bool> run(KernelContext& ctx) const = 0;
  // Channels-last activations: a kernel that can read its input 0 (and 3, a residual) and write
  // its output 0 stored NHWC (same dims, NHWC order) says so; plan_channels_last() then says
  // which of them are. Such a kernel must never return false for those values.
  virtual bool channels_last_capable() const { return false; }
  virtual void set_channels_last(bool x, bool z, bool y) {}
};

// Stores NHWC every 4-D value that a channels-last-capable kernel writes and only such kernels
// read (as input 0 or 3; never a graph output), and tells its writer and readers.
// `kernels[i]`: node i's kernel or nullptr.
void plan_channels_last(const Graph& graph, const std::vector<std::unique_ptr<FastKernel>>& kernels);

// Calls a fast kernel completed in this process (the tests check that a case ran on it).
uint64_t fast_kernel_calls();
void count_fast_kernel_call();

// The kernel for `node` (inputs' dtypes as inferred in `graph`), or nullptr.
std::unique_ptr<FastKernel> make_fast_kernel(const Node& node, const Graph& graph);

// Per op family (gemm.cpp, conv.cpp, attention.cpp, norm.cpp, elementwise.cpp).
std::unique_ptr<FastKernel> make_gemm_kernel(const Node& node, const Graph& graph);
std::unique_ptr<FastKernel> make_conv_kernel(const Node& node, const Graph& graph);
std::unique_ptr<FastKernel> make_attention_kernel(const Node& node, const Graph& graph);
std::unique_ptr<FastKernel> make_norm_kernel(const Node& node, const Graph& graph);
std::unique_ptr<FastKernel> make_elementwise_kernel(const Node& node, const Graph& graph);

// ---- threads ----------------------------------------------------------------------------------

// The threads this run's kernels may use: cpu_threads() divided among the fast runs in flight
// (sessions, server instances), capped by the executable's own limit. Set by RunScope.
int run_threads();
class RunScope {
 public:
  explicit RunScope(int max_threads);  // 0: no cap beyond the pool
  ~RunScope();
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  int saved_;
};
// parallel_for over the run's threads.
void parallel(int64_t n, int64_t min_chunk, const std::function<void(int64_t begin, int64_t end)>& f);

// ---- GEMM -------------------------------------------------------------------------------------

// How a GEMM's output C[M,N] is cut over `threads`: row_parts x col_parts parts of `rows` rows
// (the last fewer) and `cols` columns (a multiple of 16 but the last; fewer parts than asked
// when the rounding needs fewer). The most threads with parts of >= 16 rows and >= 64 columns,
// then the least data read (each part reads its rows of A and columns of B; at 2 threads: the
// larger of M and N halved). packed_b (oneDNN's pre-packed weights, which a row part reads
// without packing them again): at most 2 threads with 16 rows each keep rows, the path measured
// good there. Pure: the same arguments give the same parts.
//
//   GemmParts p = gemm_parts(16, 128, 768, 768);  // 2 x 8 parts of 64 rows x 96 columns
struct GemmParts {
  int64_t row_parts = 1, col_parts = 1, rows = 0, cols = 0;
  int64_t parts() const { return row_parts * col_parts; }
};
GemmParts gemm_parts(int threads, int64_t M, int64_t N, int64_t K, bool packed_b = false);
// f(m0, m1, n0, n1) for each part of gemm_parts(run_threads(), M, N, K), over the run's threads.
void for_each_gemm_part(int64_t M, int64_t N, int64_t K,
                        const std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>& f);

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, split over the run's threads by
// gemm_parts (each part one single-threaded sgemm). Called from inside a parallel chunk, it runs in that thread.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The same on the calling thread only.
void sgemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// OpenBLAS' own threads off (ours split the work): once per process, before the first sgemm.
void init_blas();

// ---- shared helpers ----------------------------------------------------------------------------

// True when value `v` of `graph` is known to be f32.
bool is_f32(const Graph& graph, ValueId v);
// The epilogue activations of FusedConv/FusedGemm the fast kernels apply in f32.
enum class Act : uint8_t { kNone, kRelu, kGelu, kGeluTanh, kSigmoid, kTanh, kLeakyRelu, kClip, kHardSigmoid, kHardSwish, kSwish };
struct Activation {
  Act kind = Act::kNone;
  float a = 0, b = 0;
};
// y[i] = act(y[i]) over n values.
void apply_activation(const Activation& act, float* y, int64_t n);

}  // namespace gpuopt::cpu_fast
