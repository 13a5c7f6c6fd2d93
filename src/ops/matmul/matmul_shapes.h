// numpy-style matmul shapes (1-D operands promoted, batch dims broadcast), shared by MatMul and
// the integer matmuls (MatMulInteger, QLinearMatMul in ops/quant/). Ctx is InferContext (dims may
// be unknown: `concrete` false) or KernelContext (every dim known).
#pragma once

#include "core/status.h"
#include "ops/common/broadcast.h"

namespace gpuopt {

struct MatMulShapes {
  Shape batch_a, batch_b, batch;  // batch dims of A, B and their broadcast
  int64_t M = 0, K = 0, N = 0;
  bool a_vec = false, b_vec = false;
};

template <class Ctx>
Result<MatMulShapes> matmul_shapes(const Ctx& ctx, Shape a, Shape b, bool concrete) {
  MatMulShapes s;
  if (a.empty() || b.empty())
    return ctx.error("operands must have rank >= 1 (got ranks {} and {})", a.size(), b.size());
  const Shape a0 = a, b0 = b;
  if (a.size() == 1) s.a_vec = true, a.insert(a.begin(), 1);
  if (b.size() == 1) s.b_vec = true, b.push_back(1);
  s.M = a[a.size() - 2];
  s.K = a.back();
  s.N = b.back();
  const int64_t kb = b[b.size() - 2];
  if (s.K != kb && (concrete || (dim_is_known(s.K) && dim_is_known(kb))))
    return ctx.error("inner dimensions do not match: A {} has K={}, B {} has K={}", shape_to_string(a0), s.K,
                     shape_to_string(b0), kb);
  s.batch_a.assign(a.begin(), a.end() - 2);
  s.batch_b.assign(b.begin(), b.end() - 2);
  std::optional<Shape> bs = broadcast_shapes(s.batch_a, s.batch_b);
  if (!bs)
    return ctx.error("batch dimensions of A {} and B {} do not broadcast", shape_to_string(a0), shape_to_string(b0));
  s.batch = *bs;
  return s;
}

inline Shape matmul_out_shape(const MatMulShapes& s) {
  Shape out = s.batch;
  if (!s.a_vec) out.push_back(s.M);
  if (!s.b_vec) out.push_back(s.N);
  return out;
}

}  // namespace gpuopt
