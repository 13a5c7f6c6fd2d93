// The CUDA Einsum (make_einsum_desc's plan and einsum_math.h's per-element sum, the code the
// kernel runs) evaluated on the host against the CPU reference: matrix products, batched
// attention scores, diagonals, full and partial reductions, transposes, implicit output,
// ellipsis broadcasting, three operands. Needs no GPU.
#include "ops/matmul/cuda/einsum_math.h"
#include "ops/matmul/cuda/einsum_plan.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt::cuda {
namespace {

void check(const std::string& eq, const std::vector<Shape>& shapes) {
  SCOPED_TRACE(eq);
  Node node;
  node.op = Op::Einsum;
  node.op_type = "Einsum";
  node.name = "einsum";
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = eq;
  node.attrs["equation"] = a;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<Tensor> xs;
  for (const Shape& s : shapes) {
    Tensor t = Tensor::empty(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    xs.push_back(t);
  }
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < xs.size(); ++i) {
    ptrs.push_back(&xs[i]);
    node.inputs.push_back(static_cast<ValueId>(i));
  }
  node.outputs.push_back(static_cast<ValueId>(xs.size()));
  auto ref = eval_node(node, ptrs, 12);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const Tensor& want = (*ref)[0];
  auto d = make_einsum_desc(node, shapes);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->out_n, want.numel());
  int bad = 0;
  for (int64_t o = 0; o < want.numel(); ++o) {
    const double v = einsum_point(*d, o, [&](int k, int64_t off) { return static_cast<double>(xs[k].data<float>()[off]); });
    const float got = static_cast<float>(v), w = want.data<float>()[o];
    if (std::fabs(got - w) > 1e-6f * (1.f + std::fabs(w)) && ++bad <= 5)
      ADD_FAILURE() << "element " << o << ": got " << got << " want " << w;
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaEinsumPlan, MatchesCpuReferenceOnTheHost) {
  check("ij,jk->ik", {{13, 33}, {33, 17}});
  check("bij,bjk->bik", {{3, 5, 16}, {3, 16, 7}});
  check("bhqd,bhkd->bhqk", {{2, 3, 7, 16}, {2, 3, 9, 16}});
  check("ii->i", {{9, 9}});
  check("iij->j", {{4, 4, 3}});
  check("ij->", {{8, 11}});
  check("ij->ji", {{5, 32}});
  check("ij,jk", {{6, 4}, {4, 3}});
  check("ba,cb", {{6, 4}, {5, 6}});  // implicit output in label order: a, c
  check("...ij,...jk->...ik", {{2, 1, 5, 6}, {3, 6, 4}});
  check("...i->i...", {{2, 3, 4}});
  check("i,i", {{64}, {64}});
  check("i,j->ij", {{5}, {7}});
  check("ij,jk,kl->il", {{4, 5}, {5, 6}, {6, 7}});
  check("bij,j->bi", {{2, 16, 9}, {9}});
}

}  // namespace
}  // namespace gpuopt::cuda
