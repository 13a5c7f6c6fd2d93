// Device properties through the CUDA runtime (compiled only in CUDA builds).
#include "monitor/cuda_props.h"

#include "core/cuda_check.h"

#include <cuda_runtime_api.h>

namespace gpuopt {
namespace {

std::string uuid_text(const cudaUUID_t& u) {
  // NVML's form: GPU-8-4-4-4-12 hex digits.
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

}  // namespace

Result<CudaDeviceProps> cuda_device_props(int dev) {
  cudaDeviceProp p{};
  GPUOPT_CHECK_CALL(cudaGetDeviceProperties(&p, dev));
  CudaDeviceProps out;
  out.index = dev;
  out.name = p.name;
  out.cc_major = p.major;
  out.cc_minor = p.minor;
  out.sm_count = p.multiProcessorCount;
  out.mem_bus_width_bits = p.memoryBusWidth;
  out.l2_bytes = p.l2CacheSize;
  out.total_mem_bytes = p.totalGlobalMem;
  out.shared_mem_per_sm_bytes = p.sharedMemPerMultiprocessor;
  out.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  out.uuid = uuid_text(p.uuid);
  // CUDA 13 dropped clockRate/memoryClockRate from cudaDeviceProp; the attributes remain.
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&out.sm_clock_khz, cudaDevAttrClockRate, dev));
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&out.mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
  char bus[32] = {};
  GPUOPT_CHECK_CALL(cudaDeviceGetPCIBusId(bus, sizeof(bus), dev));
  out.pci_bus_id = bus;
  return out;
}

Result<std::vector<CudaDeviceProps>> cuda_devices() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return Status::Unavailable("CUDA runtime: {}", cuda_error_text(e));
  }
  std::vector<CudaDeviceProps> out;
  for (int i = 0; i < n; ++i) {
    GPUOPT_ASSIGN_OR_RETURN(CudaDeviceProps p, cuda_device_props(i));
    out.push_back(std::move(p));
  }
  return out;
}

Result<int> cuda_runtime_version_linked() {
  int v = 0;
  GPUOPT_CHECK_CALL(cudaRuntimeGetVersion(&v));
  return v;
}

bool built_with_cuda() { return true; }

}  // namespace gpuopt
