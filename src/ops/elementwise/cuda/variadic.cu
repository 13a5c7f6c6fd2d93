// Variadic Sum / Mean / Min / Max (see variadic.h): one thread per output element reads every
// input of the group through its broadcast strides.
#include "backends/cuda/kernels/kernel_common.cuh"
#include "ops/elementwise/cuda/variadic.h"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;

// Comparison value: f16/bf16 widen to float (exact), the rest compare as themselves.
template <typename T> __device__ __forceinline__ T cmp_value(T v) { return v; }
__device__ __forceinline__ float cmp_value(__half v) { return __half2float(v); }
__device__ __forceinline__ float cmp_value(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return isnan(v);
  else return false;
}

__device__ __forceinline__ int64_t offset_of(const VariadicDesc& d, int k, const int64_t* coord) {
  int64_t off = 0;
  for (int a = 0; a < d.rank; ++a) off += coord[a] * d.strides[k][a];
  return off;
}

template <typename T, VariadicOp kOp>
__global__ void variadic_kernel(VariadicDesc d, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t coord[kMaxRank];
    int64_t rem = i;
    for (int a = d.rank - 1; a >= 0; --a) {
      coord[a] = rem % d.out_dims[a];
      rem /= d.out_dims[a];
    }
    if constexpr (kOp == VariadicOp::kSum) {
      // As the CPU reference: a double accumulator from zero, in input order, one rounding.
      double acc = 0.0;
      for (int k = 0; k < d.num_inputs; ++k) {
        const T* p = static_cast<const T*>(d.in[k]);
        acc = __dadd_rn(acc, kern::to_d(p[d.contiguous[k] ? i : offset_of(d, k, coord)]));
      }
      y[i] = kern::from_d<T>(d.scale == 1.0 ? acc : __dmul_rn(acc, d.scale));
    } else {
      constexpr bool kMax = kOp == VariadicOp::kMax;
      T o{};
      for (int k = 0; k < d.num_inputs; ++k) {
        const T* p = static_cast<const T*>(d.in[k]);
        const T v = p[d.contiguous[k] ? i : offset_of(d, k, coord)];
        if (k == 0) {
          o = v;
        } else {
          const auto a = cmp_value(o), b = cmp_value(v);
          // numpy: a NaN anywhere wins; otherwise the larger (smaller) value.
          if (is_nan(b) || (!is_nan(a) && (kMax ? b > a : b < a))) o = v;
        }
      }
      y[i] = o;
    }
  }
}

template <VariadicOp kOp, typename F>
Status dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    default: break;
  }
  if constexpr (kOp != VariadicOp::kSum) {
    switch (dt) {
      case DType::I32: f(int32_t{}); return Status::Ok();
      case DType::I64: f(int64_t{}); return Status::Ok();
      case DType::I8: f(int8_t{}); return Status::Ok();
      case DType::U8: f(uint8_t{}); return Status::Ok();
      default: break;
    }
  }
  return Status::Unimplemented("CUDA variadic {} does not support dtype {}", kOp == VariadicOp::kSum ? "Sum/Mean" : "Min/Max",
                               dtype_name(dt));
}

template <VariadicOp kOp>
Status launch_group(DType dt, const VariadicDesc& d, void* y, cudaStream_t s) {
  return dispatch<kOp>(dt, [&](auto tag) {
    using T = decltype(tag);
    variadic_kernel<T, kOp><<<kern::grid_for(d.numel, kThreads), kThreads, 0, s>>>(d, static_cast<T*>(y));
  });
}

}  // namespace

Status broadcast_strides(const Shape& in, const Shape& out, int64_t* strides, bool* contiguous) {
  const int rank = static_cast<int>(out.size()), off = rank - static_cast<int>(in.size());
  if (off < 0) return Status::InvalidArgument("input {} has a higher rank than the output {}", shape_to_string(in), shape_to_string(out));
  int64_t st = 1;
  for (int a = rank - 1; a >= 0; --a) {
    const int64_t dim = a >= off ? in[a - off] : 1;
    if (dim != out[a] && dim != 1)
      return Status::InvalidArgument("input {} does not broadcast to {}", shape_to_string(in), shape_to_string(out));
    strides[a] = dim == 1 ? 0 : st;
    st *= dim;
  }
  *contiguous = st == shape_numel(out);
  return Status::Ok();
}

Status launch_variadic(VariadicOp op, DType dt, const std::vector<const void*>& inputs,
                       const std::vector<Shape>& shapes, void* y, const Shape& out, double scale, cudaStream_t s) {
  if (inputs.empty() || inputs.size() != shapes.size()) return Status::InvalidArgument("variadic op needs inputs with shapes");
  if (out.size() > static_cast<size_t>(kMaxRank)) return Status::Unimplemented("rank {} exceeds {}", out.size(), kMaxRank);
  const int64_t numel = shape_numel(out);
  if (numel == 0) return Status::Ok();
  size_t next = 0;
  bool first = true;
  while (next < inputs.size()) {
    VariadicDesc d;
    d.rank = static_cast<int>(out.size());
    d.numel = numel;
    for (int a = 0; a < d.rank; ++a) d.out_dims[a] = out[a];
    if (!first) {  // the running result, already in the output's shape
      d.in[0] = y;
      GPUOPT_RETURN_IF_ERROR(broadcast_strides(out, out, d.strides[0], &d.contiguous[0]));
      d.num_inputs = 1;
    }
    while (next < inputs.size() && d.num_inputs < kMaxVariadicInputs) {
      const int k = d.num_inputs++;
      d.in[k] = inputs[next];
      GPUOPT_RETURN_IF_ERROR(broadcast_strides(shapes[next], out, d.strides[k], &d.contiguous[k]));
      ++next;
    }
    d.scale = next == inputs.size() ? scale : 1.0;  // Mean divides once, at the end
    switch (op) {
      case VariadicOp::kSum: GPUOPT_RETURN_IF_ERROR(launch_group<VariadicOp::kSum>(dt, d, y, s)); break;
      case VariadicOp::kMin: GPUOPT_RETURN_IF_ERROR(launch_group<VariadicOp::kMin>(dt, d, y, s)); break;
      case VariadicOp::kMax: GPUOPT_RETURN_IF_ERROR(launch_group<VariadicOp::kMax>(dt, d, y, s)); break;
    }
    GPUOPT_CHECK_CALL(cudaGetLastError());
    first = false;
  }
  return Status::Ok();
}

}  // namespace gpuopt::cuda
