// Generic elementwise kernels (see elementwise.h). One kernel per element type with the op as a
// uniform runtime switch: memory-bound code pays nothing for the branch, and the build compiles
// 10 instantiations instead of ops x types.
#include "backends/cuda/elementwise.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace gpuopt::cuda {
namespace {

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

// Math type: double for double, float for the other floats, the type itself for integers.
template <typename T> struct MathT { using type = T; };
template <> struct MathT<__half> { using type = float; };
template <> struct MathT<__nv_bfloat16> { using type = float; };

template <typename T>
__device__ __forceinline__ typename MathT<T>::type load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return to_f(p[i]);
  else return p[i];
}
template <typename T, typename M>
__device__ __forceinline__ void store(T* p, int64_t i, M v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) p[i] = from_f<T>(static_cast<float>(v));
  else p[i] = static_cast<T>(v);
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
      case UnaryOp::kAbs: return x < M(0) ? M(-x) : x;
      case UnaryOp::kSign: return x > M(0) ? M(1) : (x < M(0) ? M(-1) : M(0));
      case UnaryOp::kClip: { M v = x < M(p.alpha) ? M(p.alpha) : x; return v > M(p.beta) ? M(p.beta) : v; }
      default: return x;
    }
  }
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, const T* __restrict__ x, T* __restrict__ y, int64_t n, UnaryParams p) {
  using M = typename MathT<T>::type;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, unary_math<M>(op, load(x, i), p));
}

template <typename T>
__global__ void predicate_kernel(UnaryOp op, const T* __restrict__ x, bool* __restrict__ y, int64_t n, UnaryParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const auto v = load(x, i);
    bool r = false;
    if constexpr (IsFloat<T>::value) {
      if (op == UnaryOp::kIsNaN) r = isnan(v);
      else if (op == UnaryOp::kIsInf) r = isinf(v) && ((v > 0 && p.alpha != 0.f) || (v < 0 && p.beta != 0.f));
    }
    if (op == UnaryOp::kNot) r = !(v != 0);
    y[i] = r;
  }
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
      else { if (b == M(0)) return M(0); M r = a % b; return (r != M(0) && ((r < M(0)) != (b < M(0)))) ? M(r + b) : r; }
    case BinaryOp::kPRelu: return a < M(0) ? M(a * b) : a;
    default: return a;
  }
}

__device__ __forceinline__ void broadcast_offsets(const BroadcastDesc& d, int64_t i, int64_t* ia, int64_t* ib) {
  int64_t oa = 0, ob = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    const int64_t c = i % d.out_dims[k];
    i /= d.out_dims[k];
    oa += c * d.a_strides[k];
    ob += c * d.b_strides[k];
  }
  *ia = oa;
  *ib = ob;
}

template <typename T, typename Out>
__global__ void binary_kernel(BinaryOp op, const T* __restrict__ a, const T* __restrict__ b, Out* __restrict__ y,
                              BroadcastDesc d) {
  using M = typename MathT<T>::type;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia = i, ib = i;
    if (d.b_scalar && d.a_contiguous) ib = 0;
    else if (!(d.a_contiguous && d.b_contiguous)) broadcast_offsets(d, i, &ia, &ib);
    const M va = load(a, ia), vb = load(b, ib);
    if constexpr (std::is_same_v<Out, bool>) {
      bool r = false;
      switch (op) {
        case BinaryOp::kEqual: r = va == vb; break;
        case BinaryOp::kLess: r = va < vb; break;
        case BinaryOp::kLessOrEqual: r = va <= vb; break;
        case BinaryOp::kGreater: r = va > vb; break;
        case BinaryOp::kGreaterOrEqual: r = va >= vb; break;
        case BinaryOp::kAnd: r = (va != M(0)) && (vb != M(0)); break;
        case BinaryOp::kOr: r = (va != M(0)) || (vb != M(0)); break;
        case BinaryOp::kXor: r = (va != M(0)) != (vb != M(0)); break;
        default: break;
      }
      y[i] = r;
    } else {
      store(y, i, binary_math<M>(op, va, vb));
    }
  }
}

template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<D, bool>) {
      y[i] = load(x, i) != 0;
    } else if constexpr (std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16> ||
                         std::is_same_v<D, __half> || std::is_same_v<D, __nv_bfloat16>) {
      store(y, i, static_cast<float>(load(x, i)));
    } else {
      y[i] = static_cast<D>(x[i]);
    }
  }
}

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

// Calls f(T{}) with the device storage type of `dt`.
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

}  // namespace

bool binary_op_is_comparison(BinaryOp op) { return op >= BinaryOp::kEqual; }

Result<BroadcastDesc> make_broadcast(const Shape& a, const Shape& b) {
  BroadcastDesc d;
  const int rank = static_cast<int>(std::max(a.size(), b.size()));
  if (rank > kMaxRank) return Status::Unimplemented("broadcast of rank {} exceeds {}", rank, kMaxRank);
  d.rank = rank;
  int64_t sa = 1, sb = 1;
  d.numel = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const int ka = k - (rank - static_cast<int>(a.size())), kb = k - (rank - static_cast<int>(b.size()));
    const int64_t da = ka >= 0 ? a[ka] : 1, db = kb >= 0 ? b[kb] : 1;
    if (da != db && da != 1 && db != 1)
      return Status::InvalidArgument("shapes {} and {} do not broadcast", shape_to_string(a), shape_to_string(b));
    const int64_t out = da == 1 ? db : da;
    d.out_dims[k] = out;
    d.a_strides[k] = da == 1 ? 0 : sa;
    d.b_strides[k] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
    d.numel *= out;
  }
  d.a_contiguous = sa == d.numel;
  d.b_contiguous = sb == d.numel;
  d.b_scalar = sb == 1;
  return d;
}

Status launch_unary(UnaryOp op, DType dt, const void* x, void* y, int64_t n, const UnaryParams& p, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  const bool predicate = op == UnaryOp::kIsNaN || op == UnaryOp::kIsInf || op == UnaryOp::kNot;
  GPUOPT_RETURN_IF_ERROR(dispatch_device(dt, [&](auto tag) {
    using T = decltype(tag);
    if (predicate) predicate_kernel<T><<<grid_for(n), kThreads, 0, s>>>(op, static_cast<const T*>(x), static_cast<bool*>(y), n, p);
    else unary_kernel<T><<<grid_for(n), kThreads, 0, s>>>(op, static_cast<const T*>(x), static_cast<T*>(y), n, p);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_binary(BinaryOp op, DType dt, const void* a, const void* b, void* y, const BroadcastDesc& d,
                     cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(dispatch_device(dt, [&](auto tag) {
    using T = decltype(tag);
    if (binary_op_is_comparison(op))
      binary_kernel<T, bool><<<grid_for(d.numel), kThreads, 0, s>>>(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<bool*>(y), d);
    else
      binary_kernel<T, T><<<grid_for(d.numel), kThreads, 0, s>>>(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  Status inner;
  GPUOPT_RETURN_IF_ERROR(dispatch_device(from, [&](auto stag) {
    using S = decltype(stag);
    inner = dispatch_device(to, [&](auto dtag) {
      using D = decltype(dtag);
      cast_kernel<S, D><<<grid_for(n), kThreads, 0, s>>>(static_cast<const S*>(x), static_cast<D*>(y), n);
    });
  }));
  GPUOPT_RETURN_IF_ERROR(inner);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
