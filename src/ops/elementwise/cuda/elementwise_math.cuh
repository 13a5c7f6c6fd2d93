// Per-element math of the elementwise kernels (elementwise.cu: unary and Cast; binary.cu:
// broadcasting binary ops), and the aligned vector type their fast paths load and store.
// f16/bf16 load to f32, compute in f32 and round once on store; every path (vector, scalar tail,
// general broadcast) calls the same functions, so the path never changes a result.
#pragma once

#include "backends/cuda/elementwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace gpuopt::cuda::ew {

template <typename T> __device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
template <> struct IsFloat<double> { static constexpr bool value = true; };
template <> struct IsFloat<__half> { static constexpr bool value = true; };
template <> struct IsFloat<__nv_bfloat16> { static constexpr bool value = true; };

template <typename T>
constexpr bool kHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Math type: double for double, float for the other floats, the type itself for integers.
template <typename T> struct MathT { using type = T; };
template <> struct MathT<__half> { using type = float; };
template <> struct MathT<__nv_bfloat16> { using type = float; };

template <typename T>
__device__ __forceinline__ typename MathT<T>::type to_math(T v) {
  if constexpr (kHalfLike<T>) return to_f(v);
  else return v;
}
template <typename T, typename M>
__device__ __forceinline__ T from_math(M v) {
  if constexpr (kHalfLike<T>) return from_f<T>(static_cast<float>(v));
  else return static_cast<T>(v);
}

// V elements of T in one aligned access (ld/st.global.v2/v4 for 8 and 16 bytes).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p, int64_t i) {
  return *reinterpret_cast<const Pack<T, V>*>(p + i);
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, int64_t i, const Pack<T, V>& v) {
  *reinterpret_cast<Pack<T, V>*>(p + i) = v;
}

template <typename M>
__device__ __forceinline__ M unary_math(UnaryOp op, M x, const UnaryParams& p) {
  if constexpr (std::is_floating_point_v<M>) {
    using std::exp; using std::log; using std::tanh; using std::sqrt; using std::floor; using std::ceil;
    switch (op) {
      case UnaryOp::kIdentity: return x;
      case UnaryOp::kRelu: return x > M(0) ? x : M(0);
      case UnaryOp::kLeakyRelu: return x >= M(0) ? x : M(p.alpha) * x;
      case UnaryOp::kElu: return x >= M(0) ? x : M(p.alpha) * (exp(x) - M(1));
      case UnaryOp::kSelu: return M(p.gamma) * (x > M(0) ? x : M(p.alpha) * (exp(x) - M(1)));
      case UnaryOp::kSigmoid: return M(1) / (M(1) + exp(-x));
      case UnaryOp::kHardSigmoid: { M v = M(p.alpha) * x + M(p.beta); return v < M(0) ? M(0) : (v > M(1) ? M(1) : v); }
      case UnaryOp::kHardSwish: { M v = x / M(6) + M(0.5); v = v < M(0) ? M(0) : (v > M(1) ? M(1) : v); return x * v; }
      case UnaryOp::kTanh: return tanh(x);
      case UnaryOp::kSoftplus: return x > M(20) ? x : log1p(exp(x));
      case UnaryOp::kGelu: return M(0.5) * x * (M(1) + erf(x * M(0.70710678118654752440)));
      case UnaryOp::kGeluTanh: return M(0.5) * x * (M(1) + tanh(M(0.79788456080286535588) * (x + M(0.044715) * x * x * x)));
      case UnaryOp::kErf: return erf(x);
      case UnaryOp::kClip: { M v = x < M(p.alpha) ? M(p.alpha) : x; return v > M(p.beta) ? M(p.beta) : v; }  // min(max(x, lo), hi): hi wins when lo > hi
      case UnaryOp::kSqrt: return sqrt(x);
      case UnaryOp::kExp: return exp(x);
      case UnaryOp::kLog: return log(x);
      case UnaryOp::kNeg: return -x;
      case UnaryOp::kAbs: return x < M(0) ? -x : x;
      case UnaryOp::kReciprocal: return M(1) / x;
      case UnaryOp::kFloor: return floor(x);
      case UnaryOp::kCeil: return ceil(x);
      case UnaryOp::kRound: return rint(x);  // half to even, as ONNX Round
      case UnaryOp::kSign: return x > M(0) ? M(1) : (x < M(0) ? M(-1) : M(0));
      case UnaryOp::kSin: return sin(x);
      case UnaryOp::kCos: return cos(x);
      default: return x;
    }
  } else {
    switch (op) {
      case UnaryOp::kIdentity: return x;
      case UnaryOp::kRelu: return x > M(0) ? x : M(0);
      case UnaryOp::kNeg: return -x;
      case UnaryOp::kAbs:
        if constexpr (std::is_unsigned_v<M>) return x;
        else return x < M(0) ? M(-x) : x;
      case UnaryOp::kSign:
        if constexpr (std::is_unsigned_v<M>) return x > M(0) ? M(1) : M(0);
        else return x > M(0) ? M(1) : (x < M(0) ? M(-1) : M(0));
      case UnaryOp::kClip: { M v = x < M(p.alpha) ? M(p.alpha) : x; return v > M(p.beta) ? M(p.beta) : v; }
      default: return x;
    }
  }
}

template <typename T>
__device__ __forceinline__ T unary_elem(UnaryOp op, T x, const UnaryParams& p) {
  using M = typename MathT<T>::type;
  return from_math<T>(unary_math<M>(op, to_math(x), p));
}

template <typename M>
__device__ __forceinline__ M binary_math(BinaryOp op, M a, M b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<M>) return a / b;
      else return b == M(0) ? M(0) : M(a / b);
    case BinaryOp::kPow:
      if constexpr (std::is_floating_point_v<M>) return pow(a, b);
      else return M(pow(double(a), double(b)));
    case BinaryOp::kMin: return a < b ? a : b;
    case BinaryOp::kMax: return a > b ? a : b;
    case BinaryOp::kFMod:
      if constexpr (std::is_floating_point_v<M>) return fmod(a, b);
      else return b == M(0) ? M(0) : M(a % b);
    case BinaryOp::kMod:  // result takes the divisor's sign (Python/NumPy %)
      if constexpr (std::is_floating_point_v<M>) { M r = fmod(a, b); return (r != M(0) && ((r < M(0)) != (b < M(0)))) ? r + b : r; }
      else if constexpr (std::is_unsigned_v<M>) return b == M(0) ? M(0) : M(a % b);
      else { if (b == M(0)) return M(0); M r = a % b; return (r != M(0) && ((r < M(0)) != (b < M(0)))) ? M(r + b) : r; }
    case BinaryOp::kPRelu:
      if constexpr (std::is_unsigned_v<M>) return a;
      else return a < M(0) ? M(a * b) : a;
    default: return a;
  }
}

// One output element of a binary op: Out is T for arithmetic, bool for comparisons and logic.
template <typename T, typename Out>
__device__ __forceinline__ Out binary_elem(BinaryOp op, T a, T b) {
  using M = typename MathT<T>::type;
  const M va = to_math(a), vb = to_math(b);
  if constexpr (std::is_same_v<Out, bool>) {
    switch (op) {
      case BinaryOp::kEqual: return va == vb;
      case BinaryOp::kLess: return va < vb;
      case BinaryOp::kLessOrEqual: return va <= vb;
      case BinaryOp::kGreater: return va > vb;
      case BinaryOp::kGreaterOrEqual: return va >= vb;
      case BinaryOp::kAnd: return (va != M(0)) && (vb != M(0));
      case BinaryOp::kOr: return (va != M(0)) || (vb != M(0));
      case BinaryOp::kXor: return (va != M(0)) != (vb != M(0));
      default: return false;
    }
  } else {
    return from_math<T>(binary_math<M>(op, va, vb));
  }
}

// Cast of one element: through f32 when either side is f16/bf16 (one rounding), a != 0 test
// for bool, a plain conversion otherwise.
template <typename S, typename D>
__device__ __forceinline__ D cast_elem(S x) {
  if constexpr (std::is_same_v<D, bool>) return to_math(x) != 0;
  else if constexpr (kHalfLike<S> || kHalfLike<D>) return from_math<D>(static_cast<float>(to_math(x)));
  else return static_cast<D>(x);
}

// Calls f(T{}) with the device storage type of `dt` (host side of the launchers).
template <typename F>
Status dispatch_device(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F64: f(double{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    case DType::I32: f(int32_t{}); return Status::Ok();
    case DType::I64: f(int64_t{}); return Status::Ok();
    case DType::I8: f(int8_t{}); return Status::Ok();
    case DType::U8: f(uint8_t{}); return Status::Ok();
    case DType::Bool: f(bool{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA elementwise kernels do not support dtype {}", dtype_name(dt));
  }
}

}  // namespace gpuopt::cuda::ew
