// ops/matmul/cuda/lt_tune.h without a GPU: the plan cache's text form of a cuBLASLt algorithm
// (eight 64-bit words as 128 hex digits) reads back to the same words, and malformed text is
// refused rather than half-read (a refused entry makes the plan builder choose again).
#include "ops/matmul/cuda/lt_tune.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gpuopt::cuda {
namespace {

TEST(LtTune, AlgorithmHexRoundTrips) {
  cublasLtMatmulAlgo_t a{};
  uint64_t v = 0x0123456789abcdefull;
  for (auto& w : a.data) w = (v = v * 6364136223846793005ull + 1442695040888963407ull);
  const std::string hex = lt::algo_to_hex(a);
  EXPECT_EQ(hex.size(), sizeof(a.data) * 2);
  cublasLtMatmulAlgo_t b{};
  ASSERT_TRUE(lt::algo_from_hex(hex, &b));
  EXPECT_EQ(std::memcmp(a.data, b.data, sizeof(a.data)), 0);
}

TEST(LtTune, MalformedHexIsRefused) {
  cublasLtMatmulAlgo_t a{};
  const std::string good = lt::algo_to_hex(a);
  EXPECT_TRUE(lt::algo_from_hex(good, &a));
  EXPECT_FALSE(lt::algo_from_hex(good.substr(1), &a));           // one digit short
  EXPECT_FALSE(lt::algo_from_hex(good + "0", &a));               // one too many
  std::string bad = good;
  bad[17] = 'g';
  EXPECT_FALSE(lt::algo_from_hex(bad, &a));                      // not hex
  EXPECT_FALSE(lt::algo_from_hex("", &a));
}

}  // namespace
}  // namespace gpuopt::cuda
