// MatMul, Gemm, Einsum against naive loops that index every operand from the unravelled output
// index (no shared broadcasting helpers).
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

// numpy matmul semantics written out: promote 1-D, broadcast batch dims right-aligned.
std::vector<double> matmul_oracle(const Tensor& a, const Tensor& b, Shape* out) {
  Shape as = a.shape(), bs = b.shape();
  const bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const size_t br = std::max(as.size(), bs.size()) - 2;
  Shape batch(br);
  auto dim_at = [&](const Shape& s, size_t i) -> int64_t {  // batch dim i of s, right-aligned
    const size_t sb = s.size() - 2;
    return i + sb < br ? 1 : s[i + sb - br];
  };
  for (size_t i = 0; i < br; ++i) batch[i] = std::max(dim_at(as, i), dim_at(bs, i));
  *out = batch;
  if (!av) out->push_back(M);
  if (!bv) out->push_back(N);
  const int64_t B = shape_numel(batch);
  std::vector<double> y;
  const std::vector<double> va = values(a), vb = values(b);
  for (int64_t bi = 0; bi < B; ++bi) {
    int64_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t i = br; i-- > 0;) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      const int64_t da = dim_at(as, i), db = dim_at(bs, i);
      oa += (da == 1 ? 0 : idx) * sa;
      ob += (db == 1 ? 0 : idx) * sb;
      sa *= da;
      sb *= db;
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += va[(oa * M + m) * K + k] * vb[(ob * K + k) * N + n];
        y.push_back(s);
      }
  }
  return y;
}

void check_matmul(DType dt, Shape as, Shape bs) {
  const Tensor a = random_tensor(dt, as), b = random_tensor(dt, bs);
  auto r = run(make_node(Op::MatMul, 2, 1), {&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Shape os;
  const auto want = matmul_oracle(a, b, &os);
  expect_close((*r)[0], want, os,
               fmt::format("MatMul {} {}x{}", dtype_name(dt), shape_to_string(as), shape_to_string(bs)));
}

TEST(MatMul, Shapes) {
  check_matmul(DType::F32, {16, 33}, {33, 7});
  check_matmul(DType::F32, {2, 3, 5, 64}, {2, 3, 64, 9});
  check_matmul(DType::F32, {3, 1, 4, 5}, {7, 5, 6});  // batch broadcast both ways
  check_matmul(DType::F32, {5}, {5});
  check_matmul(DType::F32, {5}, {2, 5, 3});
  check_matmul(DType::F32, {2, 4, 5}, {5});
  check_matmul(DType::F32, {0, 5}, {5, 3});
}
TEST(MatMul, Dtypes) {
  check_matmul(DType::F16, {8, 31}, {31, 6});
  check_matmul(DType::BF16, {2, 8, 16}, {16, 5});
  check_matmul(DType::F64, {3, 7}, {7, 2});
  const Tensor a = random_tensor(DType::I32, {4, 9}, -100, 100), b = random_tensor(DType::I32, {9, 3}, -100, 100);
  auto r = run(make_node(Op::MatMul, 2, 1), {&a, &b});
  ASSERT_TRUE(r.ok());
  Shape os;
  expect_close((*r)[0], matmul_oracle(a, b, &os), os, "MatMul i32");
}
TEST(MatMul, Errors) {
  const Tensor a = random_tensor(DType::F32, {2, 5}), b = random_tensor(DType::F32, {6, 3});
  EXPECT_EQ(error_of(make_node(Op::MatMul, 2, 1, {}, "mm"), {&a, &b}),
            "[MatMul] node 'mm': inner dimensions do not match: A [2,5] has K=5, B [6,3] has K=6");
  const Tensor c = random_tensor(DType::F32, {2, 3, 5}), d = random_tensor(DType::F32, {4, 5, 3});
  EXPECT_NE(error_of(make_node(Op::MatMul, 2, 1), {&c, &d}).find("do not broadcast"), std::string::npos);
  const Tensor e = random_tensor(DType::F16, {5, 3});
  EXPECT_NE(error_of(make_node(Op::MatMul, 2, 1), {&a, &e}).find("dtype"), std::string::npos);
}
TEST(MatMul, SymbolicBatch) {
  ValueInfo a{DType::F32, true, {kFirstSymbolDim, kFirstSymbolDim - 1, 64}, nullptr};
  ValueInfo b{DType::F32, true, {64, 32}, nullptr};
  auto r = infer_node(make_node(Op::MatMul, 2, 1), {&a, &b}, 17);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape, (Shape{kFirstSymbolDim, kFirstSymbolDim - 1, 32}));
}

void check_gemm(int64_t M, int64_t K, int64_t N, bool ta, bool tb, float alpha, float beta, Shape cs) {
  const Tensor a = random_tensor(DType::F32, ta ? Shape{K, M} : Shape{M, K});
  const Tensor b = random_tensor(DType::F32, tb ? Shape{N, K} : Shape{K, N});
  const Tensor c = random_tensor(DType::F32, cs);
  AttributeMap at;
  at["transA"] = attr_i(ta);
  at["transB"] = attr_i(tb);
  at["alpha"] = attr_f(alpha);
  at["beta"] = attr_f(beta);
  const bool has_c = !(cs.size() == 1 && cs[0] == 0);
  auto r = run(make_node(Op::Gemm, has_c ? 3 : 2, 1, at),
               has_c ? std::vector<const Tensor*>{&a, &b, &c} : std::vector<const Tensor*>{&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += a.get_f64(ta ? k * M + m : m * K + k) * b.get_f64(tb ? n * K + k : k * N + n);
      double cv = 0;
      if (has_c) {
        const int64_t cm = cs.size() == 2 && cs[0] != 1 ? m : 0;
        const int64_t cn = !cs.empty() && cs.back() != 1 ? n : 0;
        cv = c.get_f64(cs.size() == 2 ? cm * cs[1] + cn : cn);
      }
      want.push_back(alpha * s + beta * cv);
    }
  expect_close((*r)[0], want, {M, N}, "Gemm");
}

TEST(Gemm, Variants) {
  check_gemm(7, 16, 5, false, false, 1.0f, 1.0f, {7, 5});
  check_gemm(7, 16, 5, true, false, 0.5f, 2.0f, {5});
  check_gemm(8, 3, 9, false, true, 1.5f, -1.0f, {1, 9});
  check_gemm(8, 3, 9, true, true, 1.0f, 0.25f, {8, 1});
  check_gemm(4, 4, 4, false, false, 1.0f, 1.0f, {});
  check_gemm(4, 33, 2, false, true, 1.0f, 1.0f, {0});  // no C
}
TEST(Gemm, Errors) {
  const Tensor a = random_tensor(DType::F32, {3, 4}), b = random_tensor(DType::F32, {5, 6}),
               c = random_tensor(DType::F32, {2});
  EXPECT_NE(error_of(make_node(Op::Gemm, 2, 1), {&a, &b}).find("inner dimensions do not match"), std::string::npos);
  const Tensor b2 = random_tensor(DType::F32, {4, 6});
  EXPECT_NE(error_of(make_node(Op::Gemm, 3, 1), {&a, &b2, &c}).find("does not broadcast to the output [3,6]"),
            std::string::npos);
  const Tensor a3 = random_tensor(DType::F32, {1, 3, 4});
  EXPECT_NE(error_of(make_node(Op::Gemm, 2, 1), {&a3, &b2}).find("must be 2-D"), std::string::npos);
}

Result<Tensor> einsum(const std::string& eq, const std::vector<const Tensor*>& in) {
  AttributeMap at;
  at["equation"] = attr_s(eq);
  GPUOPT_ASSIGN_OR_RETURN(auto outs, run(make_node(Op::Einsum, in.size(), 1, at), in));
  return outs[0];
}

TEST(Einsum, MatmulFamily) {
  const Tensor a = random_tensor(DType::F32, {3, 4, 5}), b = random_tensor(DType::F32, {3, 5, 7});
  auto r = einsum("bij,bjk->bik", {&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Shape os;
  expect_close(*r, matmul_oracle(a, b, &os), os, "bij,bjk->bik");
  const Tensor m1 = random_tensor(DType::F32, {4, 5}), m2 = random_tensor(DType::F32, {5, 6});
  auto r2 = einsum("ij,jk", {&m1, &m2});  // implicit output "ik"
  ASSERT_TRUE(r2.ok());
  expect_close(*r2, matmul_oracle(m1, m2, &os), os, "ij,jk");
  const Tensor e1 = random_tensor(DType::F32, {2, 1, 4, 5}), e2 = random_tensor(DType::F32, {3, 5, 2});
  auto r3 = einsum("...ij,...jk->...ik", {&e1, &e2});
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  expect_close(*r3, matmul_oracle(e1, e2, &os), os, "ellipsis matmul");
}

TEST(Einsum, TransposeReduceOuterDiagonal) {
  const Tensor a = random_tensor(DType::F32, {3, 5});
  std::vector<double> t, rs, total(1, 0.0);
  for (int64_t j = 0; j < 5; ++j)
    for (int64_t i = 0; i < 3; ++i) t.push_back(a.get_f64(i * 5 + j));
  for (int64_t i = 0; i < 3; ++i) {
    double s = 0;
    for (int64_t j = 0; j < 5; ++j) s += a.get_f64(i * 5 + j);
    rs.push_back(s);
    total[0] += s;
  }
  auto r = einsum("ij->ji", {&a});
  ASSERT_TRUE(r.ok());
  expect_close(*r, t, {5, 3}, "ij->ji");
  auto r1 = einsum("ba", {&a});  // implicit output sorts labels: "ab" = transpose
  ASSERT_TRUE(r1.ok());
  expect_close(*r1, t, {5, 3}, "ba");
  auto r2 = einsum("ij->i", {&a});
  ASSERT_TRUE(r2.ok());
  expect_close(*r2, rs, {3}, "ij->i");
  auto r3 = einsum("ij->", {&a});
  ASSERT_TRUE(r3.ok());
  expect_close(*r3, total, {}, "ij->");
  const Tensor u = random_tensor(DType::F32, {4}), v = random_tensor(DType::F32, {3});
  std::vector<double> outer;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) outer.push_back(u.get_f64(i) * v.get_f64(j));
  auto r4 = einsum("i,j->ij", {&u, &v});
  ASSERT_TRUE(r4.ok());
  expect_close(*r4, outer, {4, 3}, "outer");
  const Tensor sq = random_tensor(DType::F64, {2, 4, 4});
  std::vector<double> diag, trace(2, 0.0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i) {
      diag.push_back(sq.get_f64(b * 16 + i * 5));
      trace[b] += sq.get_f64(b * 16 + i * 5);
    }
  auto r5 = einsum("bii->bi", {&sq});
  ASSERT_TRUE(r5.ok());
  expect_close(*r5, diag, {2, 4}, "diagonal");
  auto r6 = einsum("...ii->...", {&sq});
  ASSERT_TRUE(r6.ok()) << r6.status().to_string();
  expect_close(*r6, trace, {2}, "trace");
}

TEST(Einsum, Errors) {
  const Tensor a = random_tensor(DType::F32, {3, 4}), b = random_tensor(DType::F32, {5, 6});
  EXPECT_NE(einsum("ij,jk->ik", {&a, &b}).status().message().find("label 'j' has extent 4"), std::string::npos);
  EXPECT_NE(einsum("ijk->i", {&a}).status().message().find("operand 0 has rank 2 but its einsum term has 3"),
            std::string::npos);
  EXPECT_NE(einsum("ij->z", {&a}).status().message().find("output label 'z'"), std::string::npos);
  EXPECT_NE(einsum("ij,jk->ik", {&a}).status().message().find("2 operands"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
