// How GEMMs are cut over threads (gemm_parts: rows x columns parts) and the GEMMs on each path
// (oneDNN with packed column slices of constant weights, sgemm otherwise) against the CPU
// reference at 1, 2, 3 and 16 threads, for BERT-like rows (1, 7, 128, 130) and widths (768, 3072,
// and 1000, which does not split into equal 16-column slices). 16 threads need a pool of 16
// (GPUOPT_NUM_THREADS=16); a smaller pool runs them on its own threads.
#include "backends/cpu_fast/gemm_dnnl.h"
#include "backends/cpu_fast/conv_dnnl.h"
#include "fast_test_util.h"

#include <tuple>

namespace gpuopt::fast_test {
namespace {

[[maybe_unused]] const bool kThreadsSet = (setenv("GPUOPT_NUM_THREADS", "3", 0), true);

using cpu_fast::gemm_parts;
using cpu_fast::GemmParts;

// Every part in bounds, the parts tiling the output exactly once.
void expect_tiles(const GemmParts& g, int threads, int64_t M, int64_t N) {
  EXPECT_GE(g.row_parts, 1);
  EXPECT_GE(g.col_parts, 1);
  EXPECT_LE(g.parts(), std::max(threads, 1));
  EXPECT_LT((g.row_parts - 1) * g.rows, M);
  EXPECT_GE(g.row_parts * g.rows, M);
  EXPECT_LT((g.col_parts - 1) * g.cols, N);
  EXPECT_GE(g.col_parts * g.cols, N);
  if (g.col_parts > 1) {
    EXPECT_EQ(g.cols % 16, 0);
  }
}

TEST(GemmParts, ChoosesRowsColumnsOrBoth) {
  auto parts = [](int t, int64_t M, int64_t N, int64_t K, bool packed = false) {
    const GemmParts g = gemm_parts(t, M, N, K, packed);
    expect_tiles(g, t, M, N);
    return std::make_tuple(g.row_parts, g.col_parts, g.rows, g.cols);
  };
  using P = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  EXPECT_EQ(parts(1, 128, 768, 768), (P{1, 1, 128, 768}));
  // 2 threads: the larger of M and N halved (columns on a tie); packed weights with 16 rows each:
  // rows, as before.
  EXPECT_EQ(parts(2, 128, 768, 768), (P{1, 2, 128, 384}));
  EXPECT_EQ(parts(2, 768, 128, 768), (P{2, 1, 384, 128}));
  EXPECT_EQ(parts(2, 1024, 1024, 1024), (P{1, 2, 1024, 512}));
  EXPECT_EQ(parts(2, 128, 768, 768, true), (P{2, 1, 64, 768}));
  EXPECT_EQ(parts(2, 20, 768, 768, true), (P{1, 2, 20, 384}));
  // 16 threads on BERT's 128 rows: 16 parts of >= 16 rows x >= 64 columns, the least data read.
  EXPECT_EQ(parts(16, 128, 768, 768), (P{2, 8, 64, 96}));
  EXPECT_EQ(parts(16, 128, 3072, 768), (P{1, 16, 128, 192}));
  EXPECT_EQ(parts(16, 128, 768, 768, true), (P{2, 8, 64, 96}));
  EXPECT_EQ(parts(16, 128, 768, 3072), (P{2, 8, 64, 96}));
  EXPECT_EQ(parts(16, 1024, 1024, 1024), (P{4, 4, 256, 256}));
  // Few rows: columns only, each thread reading its slice of the weights.
  EXPECT_EQ(parts(16, 1, 3072, 768), (P{1, 16, 1, 192}));
  // 1000 / min(16, 1000 / 64) = 67 columns, rounded up to 80: 13 parts.
  EXPECT_EQ(parts(16, 7, 1000, 768), (P{1, 13, 7, 80}));
  // 3 threads, 130 rows: 3 column parts read less than 3 row parts.
  EXPECT_EQ(parts(3, 130, 768, 768), (P{1, 3, 130, 256}));
  EXPECT_EQ(parts(16, 1, 768, 768), (P{1, 1, 1, 768}));  // 1.2 MFLOP: one part
  // Too small to split (< 2 MFLOP), or too narrow for a second column part.
  EXPECT_EQ(parts(16, 8, 8, 8), (P{1, 1, 8, 8}));
  EXPECT_EQ(parts(16, 7, 100, 4096), (P{1, 1, 7, 100}));
  for (int t : {1, 2, 3, 5, 16, 64})
    for (int64_t M : {1, 7, 16, 33, 128, 130, 1000})
      for (int64_t N : {1, 17, 64, 768, 1000, 3072})
        for (bool packed : {false, true}) expect_tiles(gemm_parts(t, M, N, 512, packed), t, M, N);
}

const std::vector<int> kThreads = {1, 2, 3, 16};

// check() at each thread count; oneDNN (B a constant) takes every count whose parts have 16 rows.
void check_split(const OneNode& o, int64_t M, int64_t N, int64_t K, bool constant_b) {
  const uint64_t before = cpu_fast::dnnl_matmul_calls();
  check(o, kTol, kThreads);
  uint64_t want = 0;
  for (int t : kThreads)
    want += constant_b && cpu_fast::have_dnnl() && gemm_parts(std::min(t, cpu_threads()), M, N, K, true).rows >= 16;
  EXPECT_EQ(cpu_fast::dnnl_matmul_calls() - before, want) << "calls oneDNN ran, " << M << " x " << N;
}

TEST(FastCpuGemmSplit, MatMulRowsByWidths) {
  constexpr int64_t K = 192;
  for (int64_t M : {1, 7, 128, 130})
    for (int64_t N : {768, 3072, 1000}) {
      check_split(one_node(Op::MatMul, {{rand_f32({M, K})}, {rand_f32({K, N}), true}}), M, N, K, true);
      if (M == 7 || M == 130)  // B an input: sgemm's parts
        check_split(one_node(Op::MatMul, {{rand_f32({M, K})}, {rand_f32({K, N})}}), M, N, K, false);
    }
}

TEST(FastCpuGemmSplit, FusedGemmBiasGeluAndGemmC) {
  constexpr int64_t K = 160;
  for (int64_t M : {1, 7, 128, 130})
    for (int64_t N : {768, 1000}) {
      check_split(one_node(Op::FusedGemm,
                           {{rand_f32({M, K}, -2, 2)}, {rand_f32({N, K}), true}, {rand_f32({N}), true}},
                           attrs({{"transB", int_attr(1)}, {"activation", string_attr("Gelu")}})),
                  M, N, K, true);
      // alpha, beta and a full C; B as stored.
      check_split(one_node(Op::Gemm, {{rand_f32({M, K})}, {rand_f32({K, N}), true}, {rand_f32({M, N}), true}},
                           attrs({{"alpha", float_attr(0.7f)}, {"beta", float_attr(1.3f)}})),
                  M, N, K, true);
    }
}

}  // namespace
}  // namespace gpuopt::fast_test
