// Path selection of the binary elementwise kernels (elementwise_plan.h).
#include "ops/elementwise/cuda/elementwise_plan.h"

namespace gpuopt::cuda {

CollapsedBroadcast collapse_broadcast(const BroadcastDesc& d) {
  CollapsedBroadcast c;
  c.numel = d.numel;
  for (int k = 0; k < d.rank; ++k) {
    if (d.out_dims[k] == 1) continue;  // size-1 axes move nothing
    if (c.rank > 0) {
      const int j = c.rank - 1;
      // Merge axis k into the previous kept axis j when each operand's stride on j is its stride
      // on k times k's extent (both 0 = broadcast on both, or contiguous across the pair).
      if (c.a_strides[j] == d.a_strides[k] * d.out_dims[k] && c.b_strides[j] == d.b_strides[k] * d.out_dims[k]) {
        c.dims[j] *= d.out_dims[k];
        c.a_strides[j] = d.a_strides[k];
        c.b_strides[j] = d.b_strides[k];
        continue;
      }
    }
    c.dims[c.rank] = d.out_dims[k];
    c.a_strides[c.rank] = d.a_strides[k];
    c.b_strides[c.rank] = d.b_strides[k];
    ++c.rank;
  }
  return c;
}

Index32 make_index32(const CollapsedBroadcast& c) {
  Index32 g;
  g.rank = c.rank;
  for (int k = 0; k < c.rank; ++k) {  // innermost first
    const int src = c.rank - 1 - k;
    g.dims[k] = FastDivmod(static_cast<uint32_t>(c.dims[src]));
    g.sa[k] = static_cast<uint32_t>(c.a_strides[src]);
    g.sb[k] = static_cast<uint32_t>(c.b_strides[src]);
  }
  return g;
}

namespace {

// True when `s` walks exactly one collapsed axis, with stride 1: the operand is [1, mid, 1] of
// the output viewed as [outer, mid, inner]. Sets mid and inner.
bool one_axis(const CollapsedBroadcast& c, const int64_t* s, int64_t* mid, int64_t* inner) {
  int axis = -1;
  for (int k = 0; k < c.rank; ++k) {
    if (s[k] == 0) continue;
    if (axis >= 0 || s[k] != 1) return false;
    axis = k;
  }
  if (axis < 0) return false;
  *mid = c.dims[axis];
  *inner = 1;
  for (int k = axis + 1; k < c.rank; ++k) *inner *= c.dims[k];
  return true;
}

bool all_zero(const CollapsedBroadcast& c, const int64_t* s) {
  for (int k = 0; k < c.rank; ++k)
    if (s[k] != 0) return false;
  return true;
}

// True when `s` are the contiguous strides of the collapsed output: the operand is full size.
bool all_full(const CollapsedBroadcast& c, const int64_t* s) {
  int64_t want = 1;
  for (int k = c.rank - 1; k >= 0; --k) {
    if (s[k] != want) return false;
    want *= c.dims[k];
  }
  return true;
}

}  // namespace

BinaryPlan plan_binary(const BroadcastDesc& d, size_t in_size, size_t out_size, const void* a, const void* b,
                       const void* y) {
  BinaryPlan p;
  p.shape = collapse_broadcast(d);
  const CollapsedBroadcast& c = p.shape;
  if (d.numel > kMax32) {
    p.why = "2^31 elements or more: 64-bit index math";
    return p;
  }
  p.path = BinaryPath::kGeneral32;
  p.vec = vec_width(in_size);
  const size_t in_bytes = static_cast<size_t>(p.vec) * in_size, out_bytes = static_cast<size_t>(p.vec) * out_size;
  if (!aligned_to(y, out_bytes)) {
    p.why = "output not aligned for vector stores";
    return p;
  }
  const bool a_full = all_full(c, c.a_strides), b_full = all_full(c, c.b_strides);
  const bool a_scalar = all_zero(c, c.a_strides), b_scalar = all_zero(c, c.b_strides);
  // Full operands take vector loads, so they must be aligned to a whole vector.
  auto full_ok = [&](const void* ptr) { return aligned_to(ptr, in_bytes); };
  if (a_full && b_full) {
    if (!full_ok(a) || !full_ok(b)) {
      p.why = "inputs not aligned for vector loads";
      return p;
    }
    p.path = BinaryPath::kVector;
    p.mode = VecMode::kSame;
    p.why = "same shape";
    return p;
  }
  if (a_full != b_full) {
    const void* big = a_full ? a : b;
    const void* small = a_full ? b : a;
    if (!full_ok(big)) {
      p.why = "the full input is not aligned for vector loads";
      return p;
    }
    if (a_full ? b_scalar : a_scalar) {
      p.path = BinaryPath::kVector;
      p.mode = a_full ? VecMode::kScalarB : VecMode::kScalarA;
      p.why = "one input is a single element";
      return p;
    }
    int64_t mid = 1, inner = 1;
    if (one_axis(c, a_full ? c.b_strides : c.a_strides, &mid, &inner)) {
      // A vector of V outputs must read one small element (inner a multiple of V), or V
      // contiguous aligned ones (inner 1, mid a multiple of V); anything else goes general.
      const bool bcast = inner % p.vec == 0;
      const bool contiguous = inner == 1 && mid % p.vec == 0 && full_ok(small);
      if (bcast || contiguous) {
        p.path = BinaryPath::kVector;
        p.mode = a_full ? VecMode::kMidB : VecMode::kMidA;
        p.mid = mid;
        p.inner = inner;
        p.small_vector = contiguous && !bcast;
        p.why = inner == 1 ? "row broadcast" : "column or channel broadcast";
        return p;
      }
      p.why = "row/column broadcast of extents that do not fill whole vectors";
      return p;
    }
  }
  // Anything else vectorises when a vector never crosses the innermost collapsed axis, so each
  // operand's V elements are contiguous (stride 1) or one element (stride 0).
  const int last = c.rank - 1;
  if (last >= 0 && c.dims[last] % p.vec == 0) {
    const bool av = c.a_strides[last] == 1, bv = c.b_strides[last] == 1;
    if ((!av || full_ok(a)) && (!bv || full_ok(b))) {
      p.path = BinaryPath::kVector;
      p.mode = VecMode::kBroadcast;
      p.a_vector = av;
      p.b_vector = bv;
      p.why = "general broadcast, innermost axis of whole vectors";
      return p;
    }
    p.why = "general broadcast, inputs not aligned for vector loads";
    return p;
  }
  p.why = "general broadcast";
  return p;
}

}  // namespace gpuopt::cuda
