// The GEMMs the fast backend gives to oneDNN's matmul (builds with it; gemm_dnnl.h: a constant
// 2-D B, rows enough for every thread) against the CPU reference: B as stored and transposed,
// alpha, beta and C broadcast every way, FusedGemm's activations, odd extents, rows that split
// unequally, 1 thread and the pool; and the cases left to sgemm. Builds without oneDNN check the
// same cases on sgemm.
#include "backends/cpu_fast/gemm_dnnl.h"
#include "backends/cpu_fast/conv_dnnl.h"
#include "fast_test_util.h"

namespace gpuopt::fast_test {
namespace {

[[maybe_unused]] const bool kThreadsSet = (setenv("GPUOPT_NUM_THREADS", "3", 0), true);

// check() runs the node on 1 thread and on the pool; oneDNN takes a run whose parts (gemm_parts)
// have at least 16 rows (when `dnnl`: B is a constant). The GEMM is rows x n x k.
void check_routed(const OneNode& o, int64_t rows, bool dnnl, int64_t n, int64_t k) {
  const uint64_t before = cpu_fast::dnnl_matmul_calls();
  check(o);
  uint64_t want = 0;
  for (int t : {1, cpu_threads()})
    want += dnnl && cpu_fast::have_dnnl() && cpu_fast::gemm_parts(t, rows, n, k, true).rows >= 16;
  EXPECT_EQ(cpu_fast::dnnl_matmul_calls() - before, want) << "calls oneDNN ran";
}

TEST(FastCpuDnnl, MatMulWithConstantWeights) {
  check_routed(one_node(Op::MatMul, {{rand_f32({53, 37})}, {rand_f32({37, 29}), true}}), 53, true, 29, 37);
  // Batch matrices of A are rows of one GEMM: 2 x 3 x 9 = 54 rows.
  check_routed(one_node(Op::MatMul, {{rand_f32({2, 3, 9, 40})}, {rand_f32({40, 70}), true}}), 54, true, 70, 40);
  check_routed(one_node(Op::MatMul, {{rand_f32({20, 64})}, {rand_f32({64, 48}), true}}), 20, true, 48, 64);
  // Too few rows for oneDNN; B not a constant.
  check_routed(one_node(Op::MatMul, {{rand_f32({7, 64})}, {rand_f32({64, 48}), true}}), 7, true, 48, 64);
  check_routed(one_node(Op::MatMul, {{rand_f32({64, 32})}, {rand_f32({32, 48})}}), 64, false, 48, 32);
}

TEST(FastCpuDnnl, GemmAlphaBetaBroadcastAndActivations) {
  for (int tb : {0, 1})
    for (const Shape& cs : {Shape{33}, Shape{1, 33}, Shape{61, 1}, Shape{61, 33}, Shape{1}}) {
      Tensor b = tb ? rand_f32({33, 45}) : rand_f32({45, 33});
      check_routed(one_node(Op::Gemm, {{rand_f32({61, 45})}, {b, true}, {rand_f32(cs), true}},
                            attrs({{"transB", int_attr(tb)}, {"alpha", float_attr(0.7f)}, {"beta", float_attr(1.3f)}})),
                   61, true, 33, 45);
    }
  for (const char* act : {"Relu", "Gelu"})
    check_routed(
        one_node(Op::FusedGemm, {{rand_f32({128, 96}, -2, 2)}, {rand_f32({80, 96}), true}, {rand_f32({80}), true}},
                 attrs({{"transB", int_attr(1)}, {"activation", string_attr(act)}})),
        128, true, 80, 96);
  // transA: sgemm.
  check_routed(one_node(Op::Gemm, {{rand_f32({45, 61})}, {rand_f32({45, 33}), true}}, attrs({{"transA", int_attr(1)}})),
               61, false, 33, 45);
}

}  // namespace
}  // namespace gpuopt::fast_test
