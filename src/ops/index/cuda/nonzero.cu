// NonZero (see nonzero.h). Integers and bool are non-zero when any bit is set; floats when any
// bit but the sign is (nonzero_math.h), so the selection depends only on the element width: four
// CUB instantiations serve every dtype.
#include "backends/cuda/elementwise.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "ops/index/cuda/nonzero.h"
#include "ops/index/cuda/nonzero_math.h"
#include "core/cuda_check.h"

#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;

template <typename U>
struct NonZeroAt {
  const U* x;
  U mask;  // bits that make an element non-zero
  __device__ __forceinline__ bool operator()(int64_t i) const { return (x[i] & mask) != 0; }
};

struct Dims {
  int rank = 0;
  int64_t d[kMaxRank] = {};
};

// pos = out[(rows - 1) * count + j] (a flat position) becomes out[a * count + j] = its
// coordinate along axis a. Each thread reads its position before writing its own column.
__global__ void split_positions(int64_t* out, int64_t count, Dims dims) {
  const int rows = dims.rank > 0 ? dims.rank : 1;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < count; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pos = out[(rows - 1) * count + j];
    if (dims.rank == 0) {
      out[j] = 0;
      continue;
    }
    int64_t coord[kMaxRank];
    nonzero_coords(pos, dims.d, dims.rank, coord);
    for (int a = 0; a < dims.rank; ++a) out[a * count + j] = coord[a];
  }
}

// Calls f(U{}, mask) with the unsigned type of the element's width (nonzero_math.h).
template <typename F>
Status by_width(DType dt, F&& f) {
  int bytes = 0;
  uint64_t mask = 0;
  if (!nonzero_value_bits(dt, &bytes, &mask)) return Status::Unimplemented("CUDA NonZero does not support dtype {}", dtype_name(dt));
  switch (bytes) {
    case 1: f(uint8_t{}, static_cast<uint8_t>(mask)); break;
    case 2: f(uint16_t{}, static_cast<uint16_t>(mask)); break;
    case 4: f(uint32_t{}, static_cast<uint32_t>(mask)); break;
    default: f(uint64_t{}, mask); break;
  }
  return Status::Ok();
}

template <typename U>
cudaError_t select(void* temp, size_t& temp_bytes, const U* x, U mask, int64_t* positions, int64_t* num, int64_t n,
                   cudaStream_t s) {
  return cub::DeviceSelect::If(temp, temp_bytes, thrust::counting_iterator<int64_t>(0), positions, num, n,
                               NonZeroAt<U>{x, mask}, s);
}

constexpr size_t kCountBytes = 256;  // the selected count, at the start of the scratch (aligned)

}  // namespace

bool nonzero_dtype_supported(DType dt) {
  int bytes = 0;
  uint64_t mask = 0;
  return nonzero_value_bits(dt, &bytes, &mask);
}

Status nonzero_scratch_bytes(DType dt, int64_t n, size_t* bytes) {
  size_t temp = 0;
  cudaError_t err = cudaSuccess;
  GPUOPT_RETURN_IF_ERROR(by_width(dt, [&](auto tag, auto mask) {
    using U = decltype(tag);
    err = select<U>(nullptr, temp, nullptr, mask, nullptr, nullptr, n, nullptr);
  }));
  GPUOPT_CHECK_CALL(err);
  *bytes = kCountBytes + temp;
  return Status::Ok();
}

Status launch_nonzero(DType dt, const void* x, const Shape& shape, int64_t count, int64_t* out, void* scratch,
                      size_t scratch_bytes, cudaStream_t s) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) return Status::Unimplemented("NonZero of rank {} exceeds {}", shape.size(), kMaxRank);
  if (count == 0) return Status::Ok();
  const int64_t n = shape_numel(shape);
  if (count > n) return Status::InvalidArgument("NonZero count {} exceeds the {} input elements", count, n);
  Dims dims;
  dims.rank = static_cast<int>(shape.size());
  for (int a = 0; a < dims.rank; ++a) dims.d[a] = shape[a];
  const int rows = dims.rank > 0 ? dims.rank : 1;
  int64_t* positions = out + (rows - 1) * count;
  if (scratch_bytes < kCountBytes) return Status::InvalidArgument("NonZero scratch of {} bytes is too small", scratch_bytes);
  int64_t* num = static_cast<int64_t*>(scratch);
  void* temp = static_cast<char*>(scratch) + kCountBytes;
  size_t temp_bytes = scratch_bytes - kCountBytes;
  cudaError_t err = cudaSuccess;
  GPUOPT_RETURN_IF_ERROR(by_width(dt, [&](auto tag, auto mask) {
    using U = decltype(tag);
    err = select<U>(temp, temp_bytes, static_cast<const U*>(x), mask, positions, num, n, s);
  }));
  GPUOPT_CHECK_CALL(err);
  split_positions<<<kern::grid_for(count, kThreads), kThreads, 0, s>>>(out, count, dims);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
