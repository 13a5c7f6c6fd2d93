// parallel_memcpy copies every byte exactly, whatever the size, split and thread count: sizes
// around the thresholds, odd lengths that leave a short last chunk, forced thread counts.
#include "core/parallel_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpuopt {
namespace {

TEST(ParallelCopy, CopiesEveryByteForEverySplit) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, kParallelCopyMin - 1, kParallelCopyMin,
                   kParallelCopyMin + 7, size_t{19267584} + 3}) {
    std::vector<uint8_t> src(n), dst(n, 0);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
      std::fill(dst.begin(), dst.end(), uint8_t{0});
      parallel_memcpy(dst.data(), src.data(), n, threads);
      ASSERT_EQ(dst, src) << "n=" << n << " threads=" << threads;
    }
  }
}

TEST(ParallelCopy, LeavesBytesAroundTheDestinationAlone) {
  const size_t n = kParallelCopyMin * 2 + 13;
  std::vector<uint8_t> src(n, 0x5a), dst(n + 128, 0xa5);
  parallel_memcpy(dst.data() + 64, src.data(), n, 4);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst[i], 0xa5) << i;
  for (size_t i = 64 + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xa5) << i;
  for (size_t i = 64; i < 64 + n; ++i) ASSERT_EQ(dst[i], 0x5a) << i;
}

}  // namespace
}  // namespace gpuopt
