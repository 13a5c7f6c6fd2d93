// make_pad_desc (layout_plan.cpp), no GPU needed: the descriptor the CUDA Pad kernel walks merges
// unpadded axes and widens the unpadded last axis into 16/8/4-byte chunks; replaying the
// kernel's index rule (output index -> input index, outside -> fill) on the host over the
// descriptor must give, byte for byte, the pad computed directly per element in the original
// shape, for every mode, negative pads (crops), empty input axes, and misaligned pointers.
#include "ops/tensor/cuda/layout_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace gpuopt::cuda {
namespace {

// The index rule of layout.cu's pad_index_kernel, on the host, element = d.elem_size bytes.
std::vector<unsigned char> replay(const PadDesc& d, const std::vector<unsigned char>& in) {
  const size_t w = d.elem_size;
  std::vector<unsigned char> out(static_cast<size_t>(d.numel) * w);
  for (int64_t i = 0; i < d.numel; ++i) {
    int64_t rem = i, src = 0;
    bool outside = false;
    for (int k = d.rank - 1; k >= 0 && !outside; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      const int64_t n = d.in_dims[k];
      int64_t j = c - d.begin[k];
      if (j < 0 || j >= n) {
        if (d.mode == PadMode::kConstant) {
          outside = true;
        } else if (d.mode == PadMode::kEdge) {
          j = j < 0 ? 0 : n - 1;
        } else if (d.mode == PadMode::kWrap) {
          j = ((j % n) + n) % n;
        } else {
          const int64_t p = 2 * (n - 1);
          j = p == 0 ? 0 : ((j % p) + p) % p;
          if (j >= n) j = p - j;
        }
      }
      src += j * d.in_strides[k];
    }
    std::memcpy(out.data() + i * w, outside ? d.fill : in.data() + src * w, w);
  }
  return out;
}

// The pad computed per element in the original shape (es bytes each).
std::vector<unsigned char> reference(size_t es, const Shape& in_shape, const std::vector<int64_t>& begin,
                                     const std::vector<int64_t>& end, PadMode mode, const unsigned char* value,
                                     const std::vector<unsigned char>& in) {
  const size_t r = in_shape.size();
  Shape out_shape(r);
  int64_t n_out = 1;
  for (size_t k = 0; k < r; ++k) n_out *= (out_shape[k] = in_shape[k] + begin[k] + end[k]);
  std::vector<unsigned char> out(static_cast<size_t>(n_out) * es);
  for (int64_t i = 0; i < n_out; ++i) {
    int64_t rem = i, src = 0, stride = 1;
    bool outside = false;
    for (size_t k = r; k-- > 0;) {
      const int64_t c = rem % out_shape[k], n = in_shape[k];
      rem /= out_shape[k];
      int64_t j = c - begin[k];
      if (j < 0 || j >= n) {
        if (mode == PadMode::kConstant) outside = true;
        else if (mode == PadMode::kEdge) j = j < 0 ? 0 : n - 1;
        else if (mode == PadMode::kWrap) j = ((j % n) + n) % n;
        else {
          const int64_t p = 2 * (n - 1);
          j = p == 0 ? 0 : ((j % p) + p) % p;
          if (j >= n) j = p - j;
        }
      }
      src += j * stride;
      stride *= n;
    }
    std::memcpy(out.data() + i * es, outside ? value : in.data() + src * es, es);
  }
  return out;
}

struct PadCase {
  Shape shape;
  std::vector<int64_t> begin, end;
  PadMode mode;
  size_t es;
};

TEST(PadPlan, DescriptorReplaysToTheDirectPad) {
  const std::vector<PadCase> cases = {
      {{2, 14, 14, 96}, {0, 0, 0, 0}, {0, 2, 3, 0}, PadMode::kConstant, 2},  // Swin's channels-last map
      {{2, 14, 14, 96}, {0, 0, 0, 0}, {0, 0, 0, 0}, PadMode::kConstant, 2},  // nothing padded: one axis
      {{2, 3, 11, 13}, {0, 0, 1, 2}, {0, 0, 0, 3}, PadMode::kReflect, 4},
      {{5, 7, 11}, {2, -1, 1}, {0, 1, -2}, PadMode::kConstant, 4},           // crops
      {{5, 1, 4}, {2, 3, 9}, {-1, 2, 6}, PadMode::kWrap, 2},
      {{3, 5, 7}, {0, 1, 0}, {0, 0, 0}, PadMode::kEdge, 8},                  // odd last axis: no chunks
      {{2, 0, 3}, {0, 2, 0}, {0, 1, 0}, PadMode::kConstant, 2},              // empty axis: all fill
      {{1, 2, 1, 3, 1, 4, 1, 5, 1, 6}, {0, 1, 0, 1, 0, 1, 0, 1, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, PadMode::kConstant, 1},
  };
  std::mt19937 rng(13);
  for (const PadCase& c : cases) {
    for (const size_t misalign : {size_t{0}, c.es}) {  // the second: both pointers off 16-byte alignment
      int64_t n_in = 1, n_out = 1;
      for (size_t k = 0; k < c.shape.size(); ++k) {
        n_in *= c.shape[k];
        n_out *= c.shape[k] + c.begin[k] + c.end[k];
      }
      std::vector<unsigned char> in(static_cast<size_t>(n_in) * c.es);
      for (auto& b : in) b = static_cast<unsigned char>(rng());
      const unsigned char value[8] = {0x3c, 0x5a, 0x11, 0x7e, 0x01, 0x02, 0x03, 0x04};
      Shape out_shape = c.shape;
      for (size_t k = 0; k < out_shape.size(); ++k) out_shape[k] += c.begin[k] + c.end[k];
      alignas(16) static unsigned char buf[64];
      auto d = make_pad_desc(c.es, c.shape, out_shape, c.begin, c.end, c.mode, value, buf + misalign, buf + misalign);
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      EXPECT_EQ(d->numel * static_cast<int64_t>(d->elem_size), n_out * static_cast<int64_t>(c.es)) << shape_to_string(c.shape);
      if (misalign) {
        EXPECT_EQ(d->elem_size, c.es);
      }
      EXPECT_EQ(replay(*d, in), reference(c.es, c.shape, c.begin, c.end, c.mode, value, in)) << shape_to_string(c.shape);
    }
  }
}

TEST(PadPlan, MergesUnpaddedAxesAndWidensTheLastOne) {
  alignas(16) static unsigned char buf[64];
  const uint16_t zero = 0;
  auto d = make_pad_desc(2, {32, 56, 56, 96}, {32, 57, 57, 96}, {0, 0, 0, 0}, {0, 1, 1, 0}, PadMode::kConstant, &zero,
                         buf, buf);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rank, 4);
  EXPECT_EQ(d->elem_size, 16u);  // 96 halves = 12 chunks of 16 bytes
  EXPECT_EQ(d->out_dims[3], 12);
  auto all = make_pad_desc(2, {4, 5, 6}, {4, 5, 6}, {0, 0, 0}, {0, 0, 0}, PadMode::kConstant, &zero, buf, buf);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->rank, 1);
  // Nine axes padded by turns with unpadded ones between: more than the kernel's 8 after merging.
  const Shape s(17, 2);
  std::vector<int64_t> b(17, 0), e(17, 0);
  for (size_t k = 0; k < 17; k += 2) b[k] = 1;
  Shape o = s;
  for (size_t k = 0; k < 17; k += 2) o[k] += 1;
  EXPECT_FALSE(make_pad_desc(2, s, o, b, e, PadMode::kConstant, &zero, buf, buf).ok());
}

}  // namespace
}  // namespace gpuopt::cuda
