// Numpy-style (ONNX "multidirectional") broadcasting: shape rules for load time and run time,
// and a row iterator that kernels use to walk broadcast inputs without per-element division.
//
//   // shape inference (dims may be unknown or symbolic at load time):
//   std::optional<Shape> s = broadcast_shapes(a.shape, b.shape);   // nullopt: do not broadcast
//
//   // kernel: one call per innermost row; offsets[k] is input k's element offset at row start,
//   // loop.inner_strides[k] is 0 (broadcast along the row) or 1.
//   BroadcastLoop loop = make_broadcast_loop(out.shape(), {a.shape(), b.shape()});
//   loop.for_each_row([&](const int64_t* offsets, int64_t out_offset) {
//     for (int64_t i = 0; i < loop.inner; ++i)
//       o[out_offset + i] = pa[offsets[0] + i * loop.inner_strides[0]] + pb[offsets[1] + i * loop.inner_strides[1]];
//   });
//
//   // or the ready-made elementwise template (any input/output element types):
//   binary_broadcast<float, float, float>(a, b, out, [](float x, float y) { return x + y; });
#pragma once

#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/op_table.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace gpuopt {

// Broadcast of one dimension pair with partial knowledge. Rules: 1 with d gives d; equal dims
// (known or the same symbol) give themselves; a known extent > 1 with an unknown/symbolic dim
// gives the known extent (the other must be 1 or equal); two different symbols, or unknown with
// a symbol, give unknown; two different known extents > 1 fail (nullopt).
std::optional<int64_t> broadcast_dim(int64_t a, int64_t b);

// Multidirectional broadcast of two or more shapes (right-aligned). nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
std::optional<Shape> broadcast_shapes(const std::vector<Shape>& shapes);

// Unidirectional: can `from` be broadcast to `to` without changing `to` (PRelu slope, Gemm C)?
// Unknown dims count as compatible (checked again at run time).
bool broadcastable_to(const Shape& from, const Shape& to);

// Shape inference helper: the broadcast of inputs `which` of ctx into *out (dtype untouched).
// Any input of unknown rank gives an output of unknown rank. Error (naming the node):
// "shapes [2,3] and [4] do not broadcast".
Status infer_broadcast(const InferContext& ctx, const std::vector<size_t>& which, ValueInfo* out);

// ---- Helpers shared by the elementwise, reduction and softmax kernels ----------------------

template <typename T>
inline constexpr bool kIsFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The shape left after reducing the flagged dims (kept as 1 with keepdims): reductions, ArgMax.
inline Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d])
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

// Integer sums and products accumulate in 64 bits of the input's signedness.
template <typename T>
using IntAcc = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;

// Wrapping 64-bit integer arithmetic (no signed-overflow UB): reductions and scans.
template <typename A>
inline A wrap_add(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename A>
inline A wrap_mul(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// double -> T with a single rounding. For f16/bf16 the double is narrowed to float with
// round-to-odd first, which makes the later float -> f16/bf16 rounding equal to a direct one.
template <typename T>
inline T store_f64(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    float f = static_cast<float>(v);
    if (!std::isnan(v) && static_cast<double>(f) != v) {
      if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      u |= 1u;
      std::memcpy(&f, &u, 4);
    }
    return T(f);
  } else {
    return from_f64<T>(v);
  }
}

// Classes of element types an op accepts (a bit set).
enum DTypeClass : unsigned {
  kFloatTypes = 1u,    // f16 bf16 f32 f64
  kSignedInts = 2u,    // i8 i16 i32 i64
  kUnsignedInts = 4u,  // u8 u16 u32 u64
  kBoolType = 8u,
  kStringType = 16u,
  kIntTypes = kSignedInts | kUnsignedInts,
  kNumericTypes = kFloatTypes | kIntTypes,
  kAllTypes = kNumericTypes | kBoolType | kStringType,
};
bool dtype_in_classes(DType t, unsigned classes);
std::string dtype_classes_string(unsigned classes);  // "float or signed integer types"

// Error unless input i's dtype (when known) is in `classes`:
// "[Sqrt] node 's': input 0 has dtype i32; expected float types".
Status check_input_dtype(const InferContext& ctx, size_t i, unsigned classes);
// Error unless inputs `which` (those with a known dtype) share one dtype; returns it (or Undefined).
Result<DType> common_input_dtype(const InferContext& ctx, const std::vector<size_t>& which);

// Elements of output 0 as far as known (0 when unknown): the base of most FLOP estimates.
double known_numel(const ValueInfo* vi);

// Strides (in elements) of a contiguous tensor of shape `in` viewed as shape `out` (right-aligned,
// 0 where `in` has extent 1 or no dimension). `out` must be the broadcast result (concrete).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// For each element of `out` (row-major), the linear index into a tensor of shape `in`.
// Materialised; meant for small index spaces such as MatMul batch dims.
std::vector<int64_t> broadcast_offsets(const Shape& in, const Shape& out);

// Iteration plan over a concrete output shape for K broadcast inputs. Adjacent dimensions that
// broadcast the same way for every input are merged, so the common cases (same shapes, scalar,
// bias over the last dim) become a single long row.
struct BroadcastLoop {
  int64_t numel = 0;                                // output elements
  int64_t inner = 1;                                // elements per row
  std::vector<int64_t> inner_strides;               // per input: 0 or 1
  std::vector<int64_t> outer_dims;                  // merged dims outside the row
  std::vector<std::vector<int64_t>> outer_strides;  // [input][dim]

  int64_t rows() const { return inner == 0 ? 0 : numel / inner; }

  // f(const int64_t* offsets, int64_t out_offset) once per row, rows in row-major order.
  template <typename F>
  void for_each_row(F&& f) const;
};

BroadcastLoop make_broadcast_loop(const Shape& out, const std::vector<Shape>& ins);

template <typename F>
void BroadcastLoop::for_each_row(F&& f) const {
  const size_t k = inner_strides.size();
  const size_t nd = outer_dims.size();
  const int64_t nrows = rows();
  std::vector<int64_t> counter(nd, 0);
  std::vector<int64_t> offsets(k, 0);
  for (int64_t r = 0; r < nrows; ++r) {
    f(static_cast<const int64_t*>(offsets.data()), r * inner);
    // increment the odometer from the innermost outer dim
    for (size_t d = nd; d-- > 0;) {
      if (++counter[d] < outer_dims[d]) {
        for (size_t i = 0; i < k; ++i) offsets[i] += outer_strides[i][d];
        break;
      }
      counter[d] = 0;
      for (size_t i = 0; i < k; ++i) offsets[i] -= outer_strides[i][d] * (outer_dims[d] - 1);
    }
  }
}

// out[i] = f(a[..], b[..]) over the broadcast of a and b; `out` already has the broadcast shape.
// A, B, O are element storage types; f receives A and B and returns something convertible to O.
template <typename A, typename B, typename O, typename F>
void binary_broadcast(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  O* po = out.data<O>();
  const BroadcastLoop loop = make_broadcast_loop(out.shape(), {a.shape(), b.shape()});
  const int64_t n = loop.inner;
  const int64_t sa = loop.inner_strides[0], sb = loop.inner_strides[1];
  loop.for_each_row([&](const int64_t* off, int64_t oo) {
    const A* ra = pa + off[0];
    const B* rb = pb + off[1];
    O* ro = po + oo;
    // separate loops so the common stride patterns vectorise
    if (sa == 1 && sb == 1)
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<O>(f(ra[i], rb[i]));
    else if (sa == 1)
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<O>(f(ra[i], rb[0]));
    else if (sb == 1)
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<O>(f(ra[0], rb[i]));
    else
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<O>(f(ra[0], rb[0]));
  });
}

// As binary_broadcast for three inputs (Where, Clip with tensor bounds).
template <typename A, typename B, typename C, typename O, typename F>
void ternary_broadcast(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out, F&& f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  const C* pc = c.data<C>();
  O* po = out.data<O>();
  const BroadcastLoop loop = make_broadcast_loop(out.shape(), {a.shape(), b.shape(), c.shape()});
  const int64_t n = loop.inner;
  const int64_t sa = loop.inner_strides[0], sb = loop.inner_strides[1], sc = loop.inner_strides[2];
  loop.for_each_row([&](const int64_t* off, int64_t oo) {
    const A* ra = pa + off[0];
    const B* rb = pb + off[1];
    const C* rc = pc + off[2];
    O* ro = po + oo;
    for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<O>(f(ra[i * sa], rb[i * sb], rc[i * sc]));
  });
}

}  // namespace gpuopt
