#include "backends/cuda/device_memory.h"

#include "core/cuda_check.h"
#include "core/table.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace gpuopt::cuda {

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::create(int device, size_t limit_bytes) {
  std::unique_ptr<DeviceMemory> m(new DeviceMemory(device, limit_bytes));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  GPUOPT_CHECK_CALL(cudaMemPoolCreate(&m->pool_, &props));
  uint64_t keep = UINT64_MAX;  // never give cached memory back to the driver between runs
  GPUOPT_CHECK_CALL(cudaMemPoolSetAttribute(m->pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  return m;
}

DeviceMemory::~DeviceMemory() {
  if (pool_) cudaMemPoolDestroy(pool_);
}

Result<Tensor> DeviceMemory::alloc(DType dtype, const Shape& shape, cudaStream_t stream, const std::string& what) {
  const int64_t n = shape_numel(shape);
  if (n < 0) return Status::Internal("device alloc of '{}' with non-concrete shape {}", what, shape_to_string(shape));
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const size_t now = in_use_.fetch_add(rounded) + rounded;
  if (limit_ && now > limit_) {
    in_use_.fetch_sub(rounded);
    return Status::OutOfMemory("out of memory allocating '{}' ({} {}): {} requested, {} in use, limit {} (--memory-limit)",
                               what, dtype_name(dtype), shape_to_string(shape), format_bytes(static_cast<double>(bytes)),
                               format_bytes(static_cast<double>(now - rounded)), format_bytes(static_cast<double>(limit_)));
  }
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, rounded, pool_, stream);
  if (e != cudaSuccess) {
    in_use_.fetch_sub(rounded);
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return Status::OutOfMemory("out of memory allocating '{}' ({} {}): {} requested, {} free of {} on cuda:{}", what,
                                 dtype_name(dtype), shape_to_string(shape), format_bytes(static_cast<double>(bytes)),
                                 format_bytes(static_cast<double>(free_b)), format_bytes(static_cast<double>(total_b)),
                                 device_);
    }
    return GPUOPT_CALL_STATUS(e).with_context(fmt::format("allocating '{}'", what));
  }
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  auto st = std::make_shared<Storage>();
  st->data = p;
  st->bytes = bytes;
  st->device = Device{DeviceKind::kCuda, device_};
  std::atomic<size_t>* counter = &in_use_;
  st->deleter = [stream, rounded, counter](void* ptr) {
    cudaFreeAsync(ptr, stream);  // stream-ordered: later work on this stream may reuse it
    counter->fetch_sub(rounded);
  };
  return Tensor::wrap(dtype, shape, std::move(st));
}

}  // namespace gpuopt::cuda
