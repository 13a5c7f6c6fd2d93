// Randomized cases against references written differently from the kernels (coordinate-wise
// loops over output elements), in dtypes the .npy oracle cannot carry (bf16, strings), plus the
// run-time errors of bad index values.
#include "test_util.h"

#include <numeric>

namespace gpuopt::tensor_test {
namespace {

const int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 16};

Shape random_shape(int rank) {
  Shape s;
  for (int i = 0; i < rank; ++i) s.push_back(kDims[rng()() % 8]);
  return s;
}

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    c[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return c;
}
int64_t ravel(const std::vector<int64_t>& c, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + c[d];
  return i;
}

// Element copy through get/set on the raw bytes, so the reference does not share copy helpers.
void ref_copy(const Tensor& src, int64_t s, Tensor& dst, int64_t d) {
  if (src.dtype() == DType::String) {
    dst.strings()[d] = src.strings()[s];
    return;
  }
  const size_t es = dtype_size(src.dtype());
  for (size_t b = 0; b < es; ++b)
    static_cast<char*>(dst.raw())[d * es + b] = static_cast<const char*>(src.raw())[s * es + b];
}

const DType kTypes[] = {DType::F32, DType::BF16, DType::F16, DType::I64, DType::U8, DType::Bool, DType::String, DType::F64};

TEST(Random, TransposeAnyDtype) {
  for (int iter = 0; iter < 40; ++iter) {
    const DType dt = kTypes[iter % 8];
    const int rank = 1 + iter % 5;
    Shape s = random_shape(rank);
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng());
    Tensor x = random_tensor(dt, s);
    Node n = make_node(Op::Transpose, 1, 1, {{"perm", attr_ints(perm)}});
    auto got = run1(n, {&x});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    Shape os;
    for (int64_t p : perm) os.push_back(s[p]);
    Tensor want = Tensor::empty(dt, os);
    for (int64_t o = 0; o < want.numel(); ++o) {
      auto oc = unravel(o, os);
      std::vector<int64_t> ic(rank);
      for (int d = 0; d < rank; ++d) ic[perm[d]] = oc[d];
      ref_copy(x, ravel(ic, s), want, o);
    }
    EXPECT_TRUE(same_tensor((*got)[0], want)) << x.describe() << " perm " << ::testing::PrintToString(perm);
  }
}

TEST(Random, SliceWithNegativeStepsAndClamping) {
  for (int iter = 0; iter < 60; ++iter) {
    const int rank = 1 + iter % 4;
    Shape s = random_shape(rank);
    const DType dt = kTypes[iter % 8];
    Tensor x = random_tensor(dt, s);
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picked(rank);
    for (int d = 0; d < rank; ++d) {
      for (int64_t i = 0; i < s[d]; ++i) picked[d].push_back(i);
      if (rng()() % 3 == 0) continue;  // axis not sliced
      const int64_t dim = s[d];
      int64_t st = static_cast<int64_t>(rng()() % (2 * dim + 5)) - dim - 2;
      int64_t en = static_cast<int64_t>(rng()() % (2 * dim + 5)) - dim - 2;
      if (rng()() % 5 == 0) en = rng()() % 2 ? INT64_MAX : INT64_MIN;
      int64_t step = static_cast<int64_t>(rng()() % 3) + 1;
      if (rng()() % 2) step = -step;
      starts.push_back(st), ends.push_back(en), axes.push_back(d - (rng()() % 2 ? rank : 0)), steps.push_back(step);
      // Reference: walk the Python way from the wrapped, clamped start while inside [lo, hi).
      auto wrap = [&](int64_t v) { return v < 0 ? (v == INT64_MIN ? -1 - dim : v + dim) : v; };
      int64_t a = wrap(st), b = wrap(en);
      picked[d].clear();
      if (step > 0) {
        a = std::max<int64_t>(0, std::min(a, dim));
        b = std::max<int64_t>(0, std::min(b, dim));
        for (int64_t i = a; i < b; i += step) picked[d].push_back(i);
      } else {
        // The spec (and ORT) clamp a negative-step start into [0, dim-1]; NumPy would give empty.
        a = std::max<int64_t>(0, std::min(a, dim - 1));
        b = std::max<int64_t>(-1, std::min(b, dim - 1));
        for (int64_t i = a; i > b && i >= 0 && i < dim; i += step) picked[d].push_back(i);
      }
    }
    Shape os;
    for (auto& p : picked) os.push_back(static_cast<int64_t>(p.size()));
    Tensor want = Tensor::empty(dt, os);
    for (int64_t o = 0; o < want.numel(); ++o) {
      auto oc = unravel(o, os);
      std::vector<int64_t> ic(rank);
      for (int d = 0; d < rank; ++d) ic[d] = picked[d][oc[d]];
      ref_copy(x, ravel(ic, s), want, o);
    }
    Tensor ts = ints(starts), te = ints(ends), ta = ints(axes), tp = ints(steps);
    Node n = make_node(Op::Slice, 5);
    auto got = run1(n, {&x, &ts, &te, &ta, &tp}, 13);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(same_tensor((*got)[0], want)) << x.describe() << " starts " << ::testing::PrintToString(starts)
                                              << " ends " << ::testing::PrintToString(ends) << " steps "
                                              << ::testing::PrintToString(steps);
  }
}

TEST(Random, GatherAndConcatBf16AndStrings) {
  for (DType dt : {DType::BF16, DType::String, DType::Bool}) {
    Tensor x = random_tensor(dt, {5, 7, 3});
    Tensor idx = Tensor::from_vector(DType::I64, {2, 2}, std::vector<int64_t>{6, -7, 0, 3});
    Node g = make_node(Op::Gather, 2, 1, {{"axis", attr_i(1)}});
    auto got = run1(g, {&x, &idx});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    Tensor want = Tensor::empty(dt, {5, 2, 2, 3});
    const int64_t map[] = {6, 0, 0, 3};
    for (int64_t a = 0; a < 5; ++a)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t c = 0; c < 3; ++c) ref_copy(x, (a * 7 + map[j]) * 3 + c, want, (a * 4 + j) * 3 + c);
    EXPECT_TRUE(same_tensor((*got)[0], want)) << dtype_name(dt);

    Tensor y = random_tensor(dt, {5, 2, 3});
    Node c = make_node(Op::Concat, 2, 1, {{"axis", attr_i(1)}});
    auto cat = run1(c, {&x, &y});
    ASSERT_TRUE(cat.ok()) << cat.status().to_string();
    Tensor wc = Tensor::empty(dt, {5, 9, 3});
    for (int64_t a = 0; a < 5; ++a)
      for (int64_t j = 0; j < 9; ++j)
        for (int64_t k = 0; k < 3; ++k)
          ref_copy(j < 7 ? x : y, j < 7 ? (a * 7 + j) * 3 + k : (a * 2 + j - 7) * 3 + k, wc, (a * 9 + j) * 3 + k);
    EXPECT_TRUE(same_tensor((*cat)[0], wc)) << dtype_name(dt);
  }
}

TEST(Random, CastBf16RoundTripIsExactOnRepresentableValues) {
  // bf16 keeps 8 significant bits: values k * 2^e with |k| < 256 survive f32 -> bf16 -> f32.
  Tensor x = Tensor::empty(DType::F32, {64});
  for (int64_t i = 0; i < 64; ++i)
    x.data<float>()[i] = std::ldexp(static_cast<float>(static_cast<int>(rng()() % 511) - 255), static_cast<int>(rng()() % 20) - 10);
  Node to_bf = make_node(Op::Cast, 1, 1, {{"to", attr_i(16)}});
  Node to_f = make_node(Op::Cast, 1, 1, {{"to", attr_i(1)}});
  auto b = run1(to_bf, {&x});
  ASSERT_TRUE(b.ok());
  auto back = run1(to_f, {&(*b)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(same_tensor((*back)[0], x));
  // Rounding to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to 1.
  Tensor tie = Tensor::from_vector(DType::F32, {2}, std::vector<float>{1.0f + 1.0f / 256, 1.0f + 3.0f / 256});
  auto r = run1(to_bf, {&tie});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].get_f64(0), 1.0);
  EXPECT_EQ((*r)[0].get_f64(1), 1.0 + 4.0 / 256);
}

TEST(Random, CastStrings) {
  Tensor s = Tensor::empty(DType::String, {4});
  s.strings() = {"1.5", "-2", "INF", "1e3"};
  auto f = run1(make_node(Op::Cast, 1, 1, {{"to", attr_i(1)}}), {&s});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)[0].get_f64(0), 1.5);
  EXPECT_EQ((*f)[0].get_f64(1), -2.0);
  EXPECT_TRUE(std::isinf((*f)[0].get_f64(2)));
  EXPECT_EQ((*f)[0].get_f64(3), 1000.0);
  auto back = run1(make_node(Op::Cast, 1, 1, {{"to", attr_i(8)}}), {&(*f)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].strings()[0], "1.5");
  EXPECT_EQ((*back)[0].strings()[3], "1000");
  s.strings()[1] = "abc";
  auto bad = run1(make_node(Op::Cast, 1, 1, {{"to", attr_i(1)}}, "c"), {&s});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "[Cast] node 'c': cannot cast string 'abc' to f32");
}

TEST(Random, RunTimeIndexErrorsAreClear) {
  Tensor x = random_tensor(DType::F32, {4, 3});
  Tensor idx = Tensor::from_vector(DType::I64, {2, 2}, std::vector<int64_t>{1, 0, 3, 2});
  Node ge = make_node(Op::GatherElements, 2, 1, {{"axis", attr_i(1)}}, "ge");
  auto r = run1(ge, {&x, &idx});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "[GatherElements] node 'ge': index 3 is out of range for axis 1 of extent 3");
  Tensor nd = Tensor::from_vector(DType::I64, {1, 2}, std::vector<int64_t>{4, 0});
  auto r2 = run1(make_node(Op::GatherND, 2, 1, {}, "gnd"), {&x, &nd});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("index 4 is out of range for axis 0 of extent 4"), std::string::npos);
  Tensor upd = random_tensor(DType::F32, {2, 2});
  auto r3 = run1(make_node(Op::ScatterElements, 3, 1, {{"reduction", attr_s("avg")}}, "se"), {&x, &idx, &upd}, 18);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("reduction 'avg'"), std::string::npos);
}

TEST(Random, TopKMatchesStableSortReference) {
  for (int iter = 0; iter < 20; ++iter) {
    const int64_t rows = kDims[rng()() % 8], n = kDims[rng()() % 8] + 3;
    const int64_t k = 1 + static_cast<int64_t>(rng()() % n);
    const bool largest = iter % 2 == 0;
    Tensor x = Tensor::empty(DType::I32, {rows, n});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng()() % 5);  // many ties
    Tensor kt = ints({k});
    auto got = run1(make_node(Op::TopK, 2, 2, {{"largest", attr_i(largest)}}), {&x, &kt});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      const int32_t* row = x.data<int32_t>() + r * n;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return largest ? row[a] > row[b] : row[a] < row[b]; });
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ((*got)[1].data<int64_t>()[r * k + j], order[j]) << "row " << r << " rank " << j;
        ASSERT_EQ((*got)[0].data<int32_t>()[r * k + j], row[order[j]]);
      }
    }
  }
}

}  // namespace
}  // namespace gpuopt::tensor_test
