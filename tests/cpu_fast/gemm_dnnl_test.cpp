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

// check() runs the node on 1 thread and on the pool; oneDNN takes a run whose rows give every
// thread at least 16 (when `dnnl`: B is a constant).
void check_routed(const OneNode& o, int64_t rows, bool dnnl) {
  const uint64_t before = cpu_fast::dnnl_matmul_calls();
  check(o);
  const uint64_t want = dnnl && cpu_fast::have_dnnl() ? (rows >= 16) + (rows >= 16 * cpu_threads()) : 0;
  EXPECT_EQ(cpu_fast::dnnl_matmul_calls() - before, want) << "calls oneDNN ran";
}

TEST(FastCpuDnnl, MatMulWithConstantWeights) {
  check_routed(one_node(Op::MatMul, {{rand_f32({53, 37})}, {rand_f32({37, 29}), true}}), 53, true);
  // Batch matrices of A are rows of one GEMM: 2 x 3 x 9 = 54 rows.
  check_routed(one_node(Op::MatMul, {{rand_f32({2, 3, 9, 40})}, {rand_f32({40, 70}), true}}), 54, true);
  check_routed(one_node(Op::MatMul, {{rand_f32({20, 64})}, {rand_f32({64, 48}), true}}), 20, true);
  // Too few rows for oneDNN; B not a constant.
  check_routed(one_node(Op::MatMul, {{rand_f32({7, 64})}, {rand_f32({64, 48}), true}}), 7, true);
  check_routed(one_node(Op::MatMul, {{rand_f32({64, 32})}, {rand_f32({32, 48})}}), 64, false);
}

TEST(FastCpuDnnl, GemmAlphaBetaBroadcastAndActivations) {
  for (int tb : {0, 1})
    for (const Shape& cs : {Shape{33}, Shape{1, 33}, Shape{61, 1}, Shape{61, 33}, Shape{1}}) {
      Tensor b = tb ? rand_f32({33, 45}) : rand_f32({45, 33});
      check_routed(one_node(Op::Gemm, {{rand_f32({61, 45})}, {b, true}, {rand_f32(cs), true}},
                            attrs({{"transB", int_attr(tb)}, {"alpha", float_attr(0.7f)}, {"beta", float_attr(1.3f)}})),
                   61, true);
    }
  for (const char* act : {"Relu", "Gelu"})
    check_routed(
        one_node(Op::FusedGemm, {{rand_f32({128, 96}, -2, 2)}, {rand_f32({80, 96}), true}, {rand_f32({80}), true}},
                 attrs({{"transB", int_attr(1)}, {"activation", string_attr(act)}})),
        128, true);
  // transA: sgemm.
  check_routed(one_node(Op::Gemm, {{rand_f32({45, 61})}, {rand_f32({45, 33}), true}}, attrs({{"transA", int_attr(1)}})),
               61, false);
}

}  // namespace
}  // namespace gpuopt::fast_test
