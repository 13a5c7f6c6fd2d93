// The host side of the CUDA variadic Sum/Mean/Min/Max: how each input's strides broadcast into
// the output (right-aligned, 0 along broadcast axes) and the error for shapes that do not.
// The kernels themselves are checked against the CPU reference by backend_ops on a GPU.
#include "ops/elementwise/cuda/variadic.h"

#include <gtest/gtest.h>

namespace gpuopt::cuda {
namespace {

std::vector<int64_t> strides_of(const Shape& in, const Shape& out, bool* contiguous) {
  std::vector<int64_t> st(out.size(), -1);
  Status s = broadcast_strides(in, out, st.data(), contiguous);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return st;
}

TEST(CudaVariadic, BroadcastStrides) {
  bool c = false;
  EXPECT_EQ(strides_of({5, 7, 11, 13}, {5, 7, 11, 13}, &c), (std::vector<int64_t>{1001, 143, 13, 1}));
  EXPECT_TRUE(c);
  EXPECT_EQ(strides_of({7, 1, 13}, {5, 7, 11, 13}, &c), (std::vector<int64_t>{0, 13, 0, 1}));
  EXPECT_FALSE(c);
  EXPECT_EQ(strides_of({}, {3, 4}, &c), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(c);
  EXPECT_EQ(strides_of({1, 4, 1}, {3, 4, 8}, &c), (std::vector<int64_t>{0, 1, 0}));
  // A leading 1 does not make it a broadcast: same element count, same layout.
  EXPECT_EQ(strides_of({1, 13}, {1, 13}, &c), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(c);
}

TEST(CudaVariadic, RejectsShapesThatDoNotBroadcast) {
  int64_t st[kMaxRank];
  bool c = false;
  EXPECT_FALSE(broadcast_strides({3}, {5, 4}, st, &c).ok());
  EXPECT_FALSE(broadcast_strides({2, 5, 4}, {5, 4}, st, &c).ok());
}

}  // namespace
}  // namespace gpuopt::cuda
