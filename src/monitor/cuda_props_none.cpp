// CUDA runtime queries in a build without CUDA: say so.
#include "monitor/cuda_props.h"

#ifndef GPUOPT_HAVE_CUDA
namespace gpuopt {

Result<std::vector<CudaDeviceProps>> cuda_devices() { return Status::Unavailable("built without CUDA"); }
Result<CudaDeviceProps> cuda_device_props(int) { return Status::Unavailable("built without CUDA"); }
Result<int> cuda_runtime_version_linked() { return Status::Unavailable("built without CUDA"); }
bool built_with_cuda() { return false; }

}  // namespace gpuopt
#endif

#ifndef GPUOPT_HAVE_CUDA
#include "monitor/lib_versions.h"
namespace gpuopt {
void fill_built_versions(LibraryVersions*) {}  // built without CUDA: nothing to report
}  // namespace gpuopt
#endif
