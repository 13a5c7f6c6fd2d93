// Device properties through the CUDA runtime (src/monitor/cuda/cuda_props.cpp, CUDA builds only; a
// build without CUDA answers Unavailable("built without CUDA")).
#pragma once

#include "core/status.h"

#include <cstddef>
#include <string>
#include <vector>

namespace gpuopt {

struct CudaDeviceProps {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:19:00.0" (cudaDeviceGetPCIBusId)
  std::string uuid;        // "GPU-xxxxxxxx-..." like NVML
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int sm_clock_khz = 0;   // peak (cudaDevAttrClockRate)
  int mem_clock_khz = 0;  // peak (cudaDevAttrMemoryClockRate)
  int mem_bus_width_bits = 0;
  int l2_bytes = 0;
  size_t total_mem_bytes = 0;
  size_t shared_mem_per_sm_bytes = 0;
  int max_threads_per_sm = 0;
};

// Every device the runtime sees. Unavailable with the runtime's reason when there is no driver
// or no device.
Result<std::vector<CudaDeviceProps>> cuda_devices();
// One device's properties (cudaGetDeviceProperties and the clock attributes); the caller checks
// that `dev` exists (cuda_devices, or bench's cuda_device_count).
Result<CudaDeviceProps> cuda_device_props(int dev);
// cudaRuntimeGetVersion of the runtime linked in (e.g. 13000); Unavailable without CUDA.
Result<int> cuda_runtime_version_linked();
bool built_with_cuda();

}  // namespace gpuopt
