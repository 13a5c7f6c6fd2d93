// The GPU half of `gpuopt bench`: small timing primitives, each timed with CUDA events after
// warm-up and summarised as the median of `repeat` samples (seconds per operation). Built from
// src/bench/*.cu and src/bench/cuda/*.cpp in CUDA builds; otherwise (no_cuda.cpp) every call
// answers Unavailable("no CUDA device"), as it does at run time when the machine has no GPU.
// Table, JSON and counting stay in CPU code (suite.cpp), which composes these.
#pragma once

#include "bench/counts.h"
#include "bench/device.h"
#include "bench/stats.h"
#include "core/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpuopt::bench {

// Number of CUDA devices; Unavailable("no CUDA device") when there are none or no driver.
Result<int> cuda_device_count();
Result<DeviceInfo> query_device(int device);

// ---- memory ----------------------------------------------------------------------------------
enum class MemTest {
  MemcpyD2D,            // cudaMemcpyAsync device -> device
  CopyKernel,           // 16-byte vector copy kernel
  CopyKernelStreaming,  // the same with evict-first (.cs) loads and stores
  ReadKernel,           // 16-byte loads, reduced to one word per thread
  WriteKernel,          // 16-byte stores
  H2DPinned,
  D2HPinned,
  H2DPageable,
  D2HPageable,
  P2P,  // cudaMemcpyPeerAsync device -> peer
};
const char* mem_test_name(MemTest t);  // "d2d_memcpy", "d2d_copy_kernel", "read_kernel", ...
bool mem_test_is_transfer(MemTest t);  // counted with transfer_count (bytes once)

struct MemParams {
  int device = 0;
  int peer = -1;  // P2P destination
  int repeat = 20;
  // Device-side tests rotate through buffers totalling at least this many bytes so that
  // small sizes are read from DRAM, not L2 (0: no rotation).
  uint64_t rotate_bytes = 0;
};
Result<TimingStats> time_memory(MemTest t, uint64_t bytes, const MemParams& p);
// Whether `device` can access `peer` directly (cudaDeviceCanAccessPeer).
Result<bool> can_access_peer(int device, int peer);

// ---- FMA throughput ----------------------------------------------------------------------------
struct FmaRun {
  TimingStats seconds;
  uint64_t threads = 0;
  int iterations = 0;  // fma_count(kind, threads, iterations) is the work of one launch
};
Result<FmaRun> time_fma(FmaKind k, int device, int repeat);

// ---- roofline ----------------------------------------------------------------------------------
Result<TimingStats> time_roofline(RooflineType t, uint64_t words, int flops_per_word, int device, int repeat);

// ---- cuBLASLt GEMM -----------------------------------------------------------------------------
enum class GemmType { F32, TF32, F16, BF16, FP8, INT8 };
const char* gemm_type_name(GemmType t);  // "f32", "tf32", "f16", "bf16", "fp8", "int8"
bool parse_gemm_type(const std::string& s, GemmType* t);
int gemm_in_bytes(GemmType t);   // element size of A and B
int gemm_out_bytes(GemmType t);  // element size of C/D
struct GemmRun {
  TimingStats seconds;
  std::string algo;  // "algo 21 tile 256x128 ... (best of 4 heuristic candidates)"
  int candidates = 0;
};
// C = A^T * B (the "TN" layout every type supports, fp8/int8 included) on random data, n x n x n.
// Unimplemented when the device lacks the type (fp8 before sm_89).
Result<GemmRun> time_gemm(GemmType t, int n, int device, int repeat, int max_algos);

// ---- latency -----------------------------------------------------------------------------------
struct LatencyEntry {
  std::string test, param;
  TimingStats seconds;
  std::string note;
};
Result<std::vector<LatencyEntry>> run_latency(int device, int repeat);

// ---- correctness checks (tests and `--check`): each compares with a CPU reference ----------
Status check_memory_kernels(int device);  // both copies, write output, read sum
Status check_fma(FmaKind k, int device);  // per-thread results vs CPU
Status check_roofline(RooflineType t, int flops_per_word, int device);
Status check_gemm(GemmType t, int n, int device);  // sampled entries vs CPU dot products
Status check_graph(int device);                    // 100-kernel graph == 100 launches

}  // namespace gpuopt::bench
