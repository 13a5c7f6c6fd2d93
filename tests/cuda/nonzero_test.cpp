// The CUDA NonZero's element test and coordinate split (nonzero_math.h, the code the kernel
// runs) evaluated on the host against the CPU reference, for every dtype the GPU takes, with the
// values where a bit test could go wrong: +0 and -0, NaN, the smallest subnormal, negative and
// minimum integers. Needs no GPU.
#include "ops/index/cuda/nonzero.h"
#include "backends/cuda/elementwise.h"
#include "ops/index/cuda/nonzero_math.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace gpuopt::cuda {
namespace {

// Raw element patterns (little-endian, of the dtype's width) that are special for `dt`.
std::vector<uint64_t> special_bits(DType dt) {
  switch (dt) {
    case DType::F32: return {0x00000000, 0x80000000, 0x7FC00000, 0xFFC00000, 0x00000001, 0x80000001, 0x3F800000, 0x7F800000};
    case DType::F64: return {0, 0x8000000000000000ull, 0x7FF8000000000000ull, 1, 0x8000000000000001ull, 0x3FF0000000000000ull};
    case DType::F16: return {0x0000, 0x8000, 0x7E00, 0x0001, 0x8001, 0x3C00, 0x7C00};
    case DType::BF16: return {0x0000, 0x8000, 0x7FC0, 0x0001, 0x8001, 0x3F80, 0xFF80};
    case DType::Bool: return {0, 1};
    default: return {0, 1, 0x80, 0xFF, 0x8000, 0x80000000u, 0x8000000000000000ull, ~uint64_t{0}};
  }
}

void check(DType dt, const Shape& shape, uint32_t seed) {
  SCOPED_TRACE(fmt::format("{} {}", dtype_name(dt), shape_to_string(shape)));
  int bytes = 0;
  uint64_t mask = 0;
  ASSERT_TRUE(nonzero_value_bits(dt, &bytes, &mask));
  ASSERT_TRUE(nonzero_dtype_supported(dt));
  ASSERT_EQ(static_cast<size_t>(bytes), dtype_size(dt));
  Tensor x = Tensor::empty(dt, shape);
  const std::vector<uint64_t> special = special_bits(dt);
  std::mt19937 rng(seed);
  auto* raw = static_cast<unsigned char*>(x.raw());
  for (int64_t i = 0; i < x.numel(); ++i) {
    // Half the elements special (zeros among them), the rest +0 or a special non-zero pattern.
    const uint64_t v = special[rng() % special.size()] & (bytes == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * bytes)) - 1));
    std::memcpy(raw + i * bytes, &v, static_cast<size_t>(bytes));
  }
  Node node;
  node.op = Op::NonZero;
  node.op_type = "NonZero";
  node.name = std::string("nz");  // not `= "nz"`: GCC 12 -Wmaybe-uninitialized false positive on the SSO buffer
  node.inputs = {0};
  node.outputs = {1};
  auto ref = eval_node(node, {&x}, 13);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const Tensor& want = (*ref)[0];
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint64_t v = 0;
    std::memcpy(&v, raw + i * bytes, static_cast<size_t>(bytes));
    if ((v & mask) != 0) pos.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(pos.size());
  const int rows = shape.empty() ? 1 : static_cast<int>(shape.size());
  ASSERT_EQ(want.shape(), (Shape{rows, count}));
  for (int64_t j = 0; j < count; ++j) {
    int64_t coord[kMaxRank] = {};
    if (!shape.empty()) nonzero_coords(pos[static_cast<size_t>(j)], shape.data(), static_cast<int>(shape.size()), coord);
    for (int a = 0; a < rows; ++a)
      ASSERT_EQ(coord[a], want.data<int64_t>()[a * count + j]) << "index " << j << " axis " << a;
  }
}

TEST(CudaNonZero, BitTestAndCoordinatesMatchCpuReference) {
  const DType dts[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,  DType::U8,  DType::I16,
                       DType::U16, DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool};
  const Shape shapes[] = {{}, {37}, {5, 8}, {3, 5, 7}, {2, 3, 4, 5}};
  uint32_t seed = 1;
  for (DType dt : dts)
    for (const Shape& s : shapes) check(dt, s, seed++);
}

TEST(CudaNonZero, DeclinesStrings) {
  EXPECT_FALSE(nonzero_dtype_supported(DType::String));
  int bytes = 0;
  uint64_t mask = 0;
  EXPECT_FALSE(nonzero_value_bits(DType::String, &bytes, &mask));
}

}  // namespace
}  // namespace gpuopt::cuda
