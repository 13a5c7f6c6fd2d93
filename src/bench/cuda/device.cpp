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
  GPUOPT_ASSIGN_OR_RETURN(CudaDeviceProps p, cuda_device_props(device));
  return DeviceInfo{std::move(p), n};
}

Result<bool> can_access_peer(int device, int peer) {
  int ok = 0;
  GPUOPT_CHECK_CALL(cudaDeviceCanAccessPeer(&ok, device, peer));
  return ok != 0;
}

}  // namespace gpuopt::bench
