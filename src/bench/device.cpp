#include "bench/device.h"

#include "monitor/spec_table.h"

namespace gpuopt::bench {

namespace {

GpuProps props_of(const DeviceInfo& d) {
  GpuProps p;
  p.cc_major = d.cc_major;
  p.cc_minor = d.cc_minor;
  p.sm_count = d.sm_count;
  p.sm_clock_mhz = d.sm_clock_khz / 1000.0;
  p.mem_clock_mhz = d.mem_clock_khz / 1000.0;
  p.mem_bus_width_bits = d.mem_bus_width_bits;
  return p;
}

// CUDA-core half2 and double FMA pipes relative to the f32 pipe (whitepapers), which the
// spec table does not carry: FLOP/clk/SM.
std::optional<double> cuda_core_rate(int major, int minor, const std::string& kind) {
  const int cc = major * 10 + minor;
  double f16x2 = 0, f64 = 0;
  switch (cc) {
    case 75:
      f16x2 = 256, f64 = 4;
      break;
    case 80:
      f16x2 = 512, f64 = 64;
      break;
    case 86:
    case 87:
    case 89:
      f16x2 = 256, f64 = 4;
      break;
    case 90:
      f16x2 = 512, f64 = 128;
      break;
    case 100:
    case 103:
      f16x2 = 512, f64 = 128;
      break;
    default:
      return std::nullopt;
  }
  return kind == "f16x2" ? f16x2 : f64;
}

}  // namespace

double theoretical_bandwidth(const DeviceInfo& d) {
  const DeviceSpec s = spec_for(props_of(d));
  if (s.mem_bandwidth_bytes_per_s) return *s.mem_bandwidth_bytes_per_s;
  return static_cast<double>(d.mem_clock_khz) * 1e3 * 2.0 * (d.mem_bus_width_bits / 8.0);  // DDR
}

std::optional<double> theoretical_peak(const DeviceInfo& d, const std::string& kind) {
  if (d.sm_count <= 0 || d.sm_clock_khz <= 0) return std::nullopt;
  if (kind == "f16x2" || kind == "f64") {
    const auto r = cuda_core_rate(d.cc_major, d.cc_minor, kind);
    if (!r) return std::nullopt;
    return *r * d.sm_count * d.sm_clock_khz * 1e3;
  }
  static const std::pair<const char*, PeakPrecision> kKinds[] = {
      {"f32", PeakPrecision::FP32},       {"gemm_f32", PeakPrecision::FP32},  {"gemm_tf32", PeakPrecision::TF32},
      {"gemm_f16", PeakPrecision::FP16},  {"gemm_bf16", PeakPrecision::BF16}, {"gemm_fp8", PeakPrecision::FP8},
      {"gemm_int8", PeakPrecision::INT8},
  };
  for (const auto& [name, p] : kKinds) {
    if (kind != name) continue;
    const auto v = spec_for(props_of(d)).peak(p);
    if (!v || *v <= 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

nlohmann::json device_to_json(const DeviceInfo& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"sm_count", d.sm_count},
          {"sm_clock_max_mhz", d.sm_clock_khz / 1000.0},
          {"mem_clock_mhz", d.mem_clock_khz / 1000.0},
          {"mem_bus_width_bits", d.mem_bus_width_bits},
          {"l2_bytes", d.l2_bytes},
          {"total_mem_bytes", d.total_mem_bytes},
          {"pci_bus_id", d.pci_bus_id},
          {"theoretical_bandwidth_GBps", theoretical_bandwidth(d) / 1e9}};
}

}  // namespace gpuopt::bench
