// The CUDA index kernels' arithmetic (index_math.h: element and tuple offsets, TopK's order; the
// code the kernels run) with the descriptors the ops build, evaluated on the host against the
// CPU reference: GatherElements, GatherND (batch_dims, scalar tuples), ScatterElements and
// ScatterND (each reduction, applied in order), TopK with ties and NaN. Needs no GPU.
#include "ops/index/cuda/index_math.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace gpuopt::cuda {
namespace {

Node make_node(Op op, const char* type, size_t inputs, size_t outputs) {
  Node n;
  n.op = op;
  n.op_type = type;
  n.name = "node";
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  for (size_t o = 0; o < outputs; ++o) n.outputs.push_back(static_cast<ValueId>(inputs + o));
  return n;
}
void set_int(Node& n, const char* name, int64_t v) {
  Attribute a;
  a.i = v;
  n.attrs[name] = a;
}
void set_str(Node& n, const char* name, const char* v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = v;
  n.attrs[name] = a;
}

Tensor random_f32(Shape s, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor t = Tensor::empty(DType::F32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}
// Indices in [lo, hi] per position; column c of the last dim uses ranges[c] when given.
Tensor random_idx(DType dt, Shape s, std::vector<std::pair<int64_t, int64_t>> ranges, std::mt19937& rng) {
  Tensor t = Tensor::empty(dt, s);
  const int64_t m = s.back();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto [lo, hi] = ranges.size() == 1 ? ranges[0] : ranges[static_cast<size_t>(i % m)];
    const int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    if (dt == DType::I64) t.data<int64_t>()[i] = v;
    else t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  int bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (got.get_f64(i) != want.get_f64(i) && !(std::isnan(got.get_f64(i)) && std::isnan(want.get_f64(i))) && ++bad <= 5)
      ADD_FAILURE() << "element " << i << ": got " << got.get_f64(i) << " want " << want.get_f64(i);
  EXPECT_EQ(bad, 0);
}

TEST(CudaIndexPlan, GatherElementsMatchesCpu) {
  std::mt19937 rng(1);
  struct C { Shape data, ind; int64_t axis; DType it; };
  for (const C& c : {C{{5, 7, 11}, {5, 4, 11}, 1, DType::I64}, C{{8, 3, 5}, {13, 3, 2}, 0, DType::I64},
                     C{{4, 16}, {3, 9}, -1, DType::I32}}) {
    Tensor x = random_f32(c.data, rng);
    const int64_t ext = c.data[static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis)];
    Tensor ind = random_idx(c.it, c.ind, {{-ext, ext - 1}}, rng);
    Node n = make_node(Op::GatherElements, "GatherElements", 2, 1);
    set_int(n, "axis", c.axis);
    auto ref = eval_node(n, {&x, &ind}, 13);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto d = make_elements_desc(c.data, c.ind, c.axis);
    ASSERT_TRUE(d.ok());
    Tensor got = Tensor::empty(DType::F32, c.ind);
    for (int64_t e = 0; e < d->numel; ++e) {
      const int64_t off = elements_offset(*d, ind.raw(), c.it == DType::I64, e);
      got.data<float>()[e] = off < 0 ? 0.f : x.data<float>()[off];
    }
    expect_equal(got, (*ref)[0]);
  }
}

TEST(CudaIndexPlan, GatherNdMatchesCpu) {
  std::mt19937 rng(2);
  struct C { Shape data, ind; int64_t b; std::vector<std::pair<int64_t, int64_t>> ranges; DType it; };
  for (const C& c : {C{{5, 7, 11}, {3, 2, 2}, 0, {{-5, 4}, {-7, 6}}, DType::I64},
                     C{{5, 7, 11}, {4, 1}, 0, {{-5, 4}}, DType::I64},
                     C{{5, 7, 11}, {9, 3}, 0, {{0, 4}, {-7, 6}, {0, 10}}, DType::I32},
                     C{{4, 7, 11}, {4, 3, 1}, 1, {{-7, 6}}, DType::I64},
                     C{{2, 3, 4, 5}, {2, 3, 2}, 2, {{-4, 3}, {0, 4}}, DType::I64}}) {
    Tensor x = random_f32(c.data, rng);
    Tensor ind = random_idx(c.it, c.ind, c.ranges, rng);
    Node n = make_node(Op::GatherND, "GatherND", 2, 1);
    set_int(n, "batch_dims", c.b);
    auto ref = eval_node(n, {&x, &ind}, 13);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto d = make_nd_desc(c.data, c.ind, c.b);
    ASSERT_TRUE(d.ok());
    Tensor got = Tensor::empty(DType::F32, (*ref)[0].shape());
    ASSERT_EQ(d->batches * d->tuples * d->slice, got.numel());
    for (int64_t i = 0; i < got.numel(); ++i) {
      const int64_t off = nd_offset(*d, ind.raw(), c.it == DType::I64, i / d->slice);
      got.data<float>()[i] = off < 0 ? 0.f : x.data<float>()[off + i % d->slice];
    }
    expect_equal(got, (*ref)[0]);
  }
}

float combine(float a, float b, const std::string& r) {
  if (r == "add") return a + b;
  if (r == "mul") return a * b;
  if (r == "max") return std::max(a, b);
  if (r == "min") return std::min(a, b);
  return b;
}

TEST(CudaIndexPlan, ScatterMatchesCpuWhenAppliedInOrder) {
  std::mt19937 rng(3);
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    SCOPED_TRACE(red);
    {  // ScatterElements along axis 1
      Tensor x = random_f32({6, 9}, rng), upd = random_f32({6, 13}, rng);
      Tensor ind = random_idx(DType::I64, {6, 13}, {{-9, 8}}, rng);
      Node n = make_node(Op::ScatterElements, "ScatterElements", 3, 1);
      set_int(n, "axis", 1);
      set_str(n, "reduction", red);
      auto ref = eval_node(n, {&x, &ind, &upd}, 18);
      ASSERT_TRUE(ref.ok()) << ref.status().to_string();
      auto d = make_elements_desc(x.shape(), ind.shape(), 1);
      ASSERT_TRUE(d.ok());
      Tensor got = Tensor::empty(DType::F32, x.shape());
      std::copy(x.data<float>(), x.data<float>() + x.numel(), got.data<float>());
      for (int64_t e = 0; e < d->numel; ++e) {
        const int64_t off = elements_offset(*d, ind.raw(), true, e);
        ASSERT_GE(off, 0);
        got.data<float>()[off] = combine(got.data<float>()[off], upd.data<float>()[e], red);
      }
      expect_equal(got, (*ref)[0]);
    }
    {  // ScatterND of rows and of single elements
      for (int64_t m : {1, 2}) {
        Tensor x = random_f32({5, 7, 11}, rng);
        Tensor ind = random_idx(DType::I64, {6, m}, m == 1 ? std::vector<std::pair<int64_t, int64_t>>{{-5, 4}}
                                                          : std::vector<std::pair<int64_t, int64_t>>{{-5, 4}, {0, 6}}, rng);
        Tensor upd = random_f32(m == 1 ? Shape{6, 7, 11} : Shape{6, 11}, rng);
        Node n = make_node(Op::ScatterND, "ScatterND", 3, 1);
        set_str(n, "reduction", red);
        auto ref = eval_node(n, {&x, &ind, &upd}, 18);
        ASSERT_TRUE(ref.ok()) << ref.status().to_string();
        auto d = make_nd_desc(x.shape(), ind.shape(), 0);
        ASSERT_TRUE(d.ok());
        Tensor got = Tensor::empty(DType::F32, x.shape());
        std::copy(x.data<float>(), x.data<float>() + x.numel(), got.data<float>());
        for (int64_t i = 0; i < upd.numel(); ++i) {
          const int64_t off = nd_offset(*d, ind.raw(), true, i / d->slice);
          ASSERT_GE(off, 0);
          float& o = got.data<float>()[off + i % d->slice];
          o = combine(o, upd.data<float>()[i], red);
        }
        expect_equal(got, (*ref)[0]);
      }
    }
  }
}

// TopK by rank: each element's output position is the number of elements before it.
TEST(CudaIndexPlan, TopKRankOrderMatchesCpuWithTiesAndNaN) {
  std::mt19937 rng(4);
  for (int largest : {1, 0}) {
    SCOPED_TRACE(largest);
    const int64_t outer = 3, n = 40, inner = 2, k = 9;
    Tensor x = Tensor::empty(DType::F32, {outer, n, inner});
    std::uniform_int_distribution<int> u(-6, 6);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng) * 0.25f;  // many ties
    x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    x.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
    x.data<float>()[100] = std::numeric_limits<float>::infinity();
    Tensor kk = Tensor::from_vector<int64_t>(DType::I64, {1}, {k});
    Node node = make_node(Op::TopK, "TopK", 2, 2);
    set_int(node, "axis", 1);
    set_int(node, "largest", largest);
    auto ref = eval_node(node, {&x, &kk}, 11);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    Tensor vals = Tensor::empty(DType::F32, {outer, k, inner}), idx = Tensor::empty(DType::I64, {outer, k, inner});
    const float* p = x.data<float>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        const int64_t base = o * n * inner + in;
        for (int64_t i = 0; i < n; ++i) {
          int64_t rank = 0;
          for (int64_t j = 0; j < n; ++j) rank += topk_before(p[base + j * inner], j, p[base + i * inner], i, largest != 0);
          if (rank < k) {
            vals.data<float>()[(o * k + rank) * inner + in] = p[base + i * inner];
            idx.data<int64_t>()[(o * k + rank) * inner + in] = i;
          }
        }
      }
    expect_equal(vals, (*ref)[0]);
    expect_equal(idx, (*ref)[1]);
  }
}

}  // namespace
}  // namespace gpuopt::cuda
