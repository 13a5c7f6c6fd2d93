// The CPU-only build: every GPU primitive says there is no CUDA device (the same answer a CUDA
// build gives at run time on a machine without a GPU), so the suite prints "skipped".
#ifndef GPUOPT_HAVE_CUDA
#include "bench/gpu.h"

namespace gpuopt::bench {
namespace {
Status none() {
  return Status::Unavailable("no CUDA device");
}
}  // namespace

Result<int> cuda_device_count() {
  return none();
}
Result<DeviceInfo> query_device(int) {
  return none();
}
Result<TimingStats> time_memory(MemTest, uint64_t, const MemParams&) {
  return none();
}
Result<bool> can_access_peer(int, int) {
  return none();
}
Result<FmaRun> time_fma(FmaKind, int, int) {
  return none();
}
Result<TimingStats> time_roofline(RooflineType, uint64_t, int, int, int) {
  return none();
}
Result<GemmRun> time_gemm(GemmType, int, int, int, int) {
  return none();
}
Result<std::vector<LatencyEntry>> run_latency(int, int) {
  return none();
}
Status check_memory_kernels(int) {
  return none();
}
Status check_fma(FmaKind, int) {
  return none();
}
Status check_roofline(RooflineType, int, int) {
  return none();
}
Status check_gemm(GemmType, int, int) {
  return none();
}
Status check_graph(int) {
  return none();
}

}  // namespace gpuopt::bench
#endif
