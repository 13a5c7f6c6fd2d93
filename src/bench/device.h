// What the benchmarks need to know about a GPU, and the theoretical ceilings derived from it.
// DeviceInfo is filled from the CUDA runtime (query_device, in gpu.h); the peak functions are
// plain arithmetic so the tests check them on the CPU.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace gpuopt::bench {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int sm_clock_khz = 0;   // maximum (boost) SM clock
  int mem_clock_khz = 0;  // peak memory clock
  int mem_bus_width_bits = 0;
  int64_t l2_bytes = 0;
  int64_t total_mem_bytes = 0;
  std::string pci_bus_id;
  int device_count = 1;  // devices visible to this process
};

// Theoretical DRAM bandwidth in bytes/s: memory clock x 2 (double data rate) x bus width.
double theoretical_bandwidth(const DeviceInfo& d);

// Per-SM per-clock rates (operations per cycle) for the CUDA-core FMA pipes and the tensor
// cores (dense). Zero where this table does not know the architecture.
struct ArchRates {
  double f32 = 0, f16x2 = 0, f64 = 0;                                    // CUDA cores, FLOP/clk/SM
  double tc_tf32 = 0, tc_f16 = 0, tc_bf16 = 0, tc_fp8 = 0, tc_int8 = 0;  // tensor cores, op/clk/SM
};
ArchRates arch_rates(int cc_major, int cc_minor);

// Peak in FLOP/s (or OP/s) for a named kind: "f32", "f16x2", "f64" (CUDA cores) or the GEMM
// kinds "gemm_f32", "gemm_tf32", "gemm_f16", "gemm_bf16", "gemm_fp8", "gemm_int8". nullopt when
// unknown. Uses the maximum SM clock, so it is an upper bound of what the chip can reach.
std::optional<double> theoretical_peak(const DeviceInfo& d, const std::string& kind);

nlohmann::json device_to_json(const DeviceInfo& d);

}  // namespace gpuopt::bench
