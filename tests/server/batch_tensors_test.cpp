// concat_rows at batch sizes where it copies on several threads (megabytes: a ResNet-50 batch of
// 32 is 19 MB): every byte where a row-by-row copy puts it, whichever thread's range a part
// straddles, with and without a padded sequence axis, and the same result below the threshold.
#include <gtest/gtest.h>

#include <cstring>

#include "core/parallel_copy.h"
#include "server/batch_tensors.h"

namespace gpuopt::server {
namespace {

// Part p's element i: a value no other part or element of nearby parts has.
template <typename T>
Tensor part(DType dt, Shape shape, int p) {
  Tensor t = Tensor::empty(dt, shape);
  T* d = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<T>((p * 7919 + i) % 251);
  return t;
}

// The oracle: element by element, each part's rows in order (padding each row's axis-1 run).
template <typename T>
void expect_concat(const Tensor& out, const std::vector<Tensor>& parts, int64_t length = -1, T pad = T(0)) {
  const T* o = out.data<T>();
  int64_t at = 0;
  for (const Tensor& p : parts) {
    const T* s = p.data<T>();
    if (length < 0) {
      for (int64_t i = 0; i < p.numel(); ++i) ASSERT_EQ(o[at + i], s[i]) << "element " << at + i;
      at += p.numel();
      continue;
    }
    const int64_t len = p.dim(1), inner = p.numel() / p.dim(0) / len;
    for (int64_t r = 0; r < p.dim(0); ++r)
      for (int64_t j = 0; j < length * inner; ++j) {
        const T want = j < len * inner ? s[r * len * inner + j] : pad;
        ASSERT_EQ(o[at + r * length * inner + j], want) << "row " << r << " element " << j;
      }
    at += p.dim(0) * length * inner;
  }
  ASSERT_EQ(at, out.numel());
}

std::vector<const Tensor*> ptrs(const std::vector<Tensor>& v) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : v) p.push_back(&t);
  return p;
}

TEST(ConcatRows, ABatchOfMegabytesIsCopiedWhereRowByRowPutsIt) {
  // 21 requests of 1-3 rows of 120 KB: 5 MB, above the threshold of a parallel copy.
  std::vector<Tensor> parts;
  for (int p = 0; p < 21; ++p) parts.push_back(part<float>(DType::F32, {1 + p % 3, 30000}, p));
  Tensor out = concat_rows(ptrs(parts), 0, -1, 0.0);
  ASSERT_GE(out.nbytes(), kParallelCopyMin);
  ASSERT_EQ(out.dim(0), 42);
  expect_concat<float>(out, parts);
}

TEST(ConcatRows, PartsOfOddSizesStraddleTheThreadsRanges) {
  // Byte-sized elements, rows of a prime length: no range boundary falls on a part's edge.
  std::vector<Tensor> parts;
  for (int p = 0; p < 6; ++p) parts.push_back(part<uint8_t>(DType::U8, {1 + p % 2, 1000003}, p));
  Tensor out = concat_rows(ptrs(parts), 0, -1, 0.0);
  ASSERT_GE(out.nbytes(), kParallelCopyMin);
  expect_concat<uint8_t>(out, parts);
}

TEST(ConcatRows, APaddedSequenceAxisAtMegabytes) {
  // [rows, len, 40000] f32 parts padded on axis 1 to 6 with -1: the pads between the copied runs.
  std::vector<Tensor> parts;
  size_t copied = 0;  // the bytes copied (the pads are written apart)
  for (int p = 0; p < 9; ++p) {
    parts.push_back(part<float>(DType::F32, {1 + p % 2, 2 + p % 5, 40000}, p));
    copied += parts.back().nbytes();
  }
  Tensor out = concat_rows(ptrs(parts), 1, 6, -1.0);
  ASSERT_GE(copied, kParallelCopyMin);
  ASSERT_EQ(out.shape(), (Shape{13, 6, 40000}));
  expect_concat<float>(out, parts, 6, -1.f);
}

TEST(ConcatRows, SmallBatchesAndTheAllocatorsMemory) {
  std::vector<Tensor> parts = {part<int32_t>(DType::I32, {2, 3}, 0), part<int32_t>(DType::I32, {1, 3}, 1)};
  Tensor given;
  Tensor out = concat_rows(ptrs(parts), 0, -1, 0.0, [&](DType dt, const Shape& s) { return given = Tensor::empty(dt, s); });
  EXPECT_EQ(out.storage().get(), given.storage().get());  // formed where the allocator said
  expect_concat<int32_t>(out, parts);
}

}  // namespace
}  // namespace gpuopt::server
