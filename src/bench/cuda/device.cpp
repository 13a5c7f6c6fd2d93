// Device discovery for the benchmarks (CUDA runtime).
#include "bench/cuda/common.h"
#include "bench/gpu.h"

namespace gpuopt::bench {

Result<int> cuda_device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return Status::Unavailable("no CUDA device");
  }
  return n;
}

Result<DeviceInfo> query_device(int device) {
  GPUOPT_ASSIGN_OR_RETURN(int n, cuda_device_count());
  if (device < 0 || device >= n)
    return Status::InvalidArgument("--device {}: this machine has {} CUDA device(s), numbered 0..{}", device, n, n - 1);
  cudaDeviceProp p{};
  GPUOPT_CHECK_CALL(cudaGetDeviceProperties(&p, device));
  DeviceInfo d;
  d.index = device;
  d.device_count = n;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.mem_bus_width_bits = p.memoryBusWidth;
  d.l2_bytes = p.l2CacheSize;
  d.total_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  // cudaDeviceProp lost clockRate/memoryClockRate in CUDA 13; the attributes remain.
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, device));
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) d.pci_bus_id = bus;
  return d;
}

Result<bool> can_access_peer(int device, int peer) {
  int ok = 0;
  GPUOPT_CHECK_CALL(cudaDeviceCanAccessPeer(&ok, device, peer));
  return ok != 0;
}

}  // namespace gpuopt::bench
