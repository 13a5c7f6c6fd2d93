// What the benchmarks need to know about a GPU, and the theoretical ceilings derived from it.
// DeviceInfo is the monitor's CudaDeviceProps (query_device in gpu.h reads it through
// cuda_device_props, monitor/cuda_props.h) and the number of devices; the peak functions are
// plain arithmetic so the tests check them on the CPU.
#pragma once

#include "monitor/cuda_props.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace gpuopt::bench {

struct DeviceInfo : CudaDeviceProps {
  int device_count = 1;  // devices visible to this process
};

// Theoretical DRAM bandwidth in bytes/s (gpu/spec_table.h: bus width x memory clock x data rate).
double theoretical_bandwidth(const DeviceInfo& d);

// Peak in FLOP/s (or OP/s) for a named kind: "f32", "f16x2", "f64" (CUDA cores) or the GEMM
// kinds "gemm_f32", "gemm_tf32", "gemm_f16", "gemm_bf16", "gemm_fp8", "gemm_int8". nullopt when
// unknown. At the maximum SM clock, so an upper bound of what the chip reaches (the spec
// table gives f32 and the tensor-core rates; f16x2 and f64 come from the FMA pipe widths here).
std::optional<double> theoretical_peak(const DeviceInfo& d, const std::string& kind);

nlohmann::json device_to_json(const DeviceInfo& d);

}  // namespace gpuopt::bench
