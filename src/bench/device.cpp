#include "bench/device.h"

namespace gpuopt::bench {

double theoretical_bandwidth(const DeviceInfo& d) {
  return static_cast<double>(d.mem_clock_khz) * 1e3 * 2.0 * (d.mem_bus_width_bits / 8.0);
}

// From NVIDIA's architecture whitepapers (dense tensor-core rates, per SM per clock).
ArchRates arch_rates(int major, int minor) {
  ArchRates r;
  const int cc = major * 10 + minor;
  switch (cc) {
    case 70:  // V100
      r = {128, 256, 64, 0, 1024, 0, 0, 0};
      break;
    case 75:  // T4, RTX 20
      r = {128, 256, 4, 0, 1024, 0, 0, 2048};
      break;
    case 80:  // A100
      r = {128, 512, 64, 1024, 2048, 2048, 0, 4096};
      break;
    case 86:  // RTX 30, A10, A40
    case 87:
      r = {256, 256, 4, 512, 1024, 1024, 0, 2048};
      break;
    case 89:  // L4, L40, RTX 40
      r = {256, 256, 4, 512, 1024, 1024, 2048, 2048};
      break;
    case 90:  // H100, H200
      r = {256, 512, 128, 2048, 4096, 4096, 8192, 8192};
      break;
    default:
      break;
  }
  return r;
}

std::optional<double> theoretical_peak(const DeviceInfo& d, const std::string& kind) {
  const ArchRates r = arch_rates(d.cc_major, d.cc_minor);
  double per_clk = 0;
  if (kind == "f32" || kind == "gemm_f32")
    per_clk = r.f32;
  else if (kind == "f16x2")
    per_clk = r.f16x2;
  else if (kind == "f64")
    per_clk = r.f64;
  else if (kind == "gemm_tf32")
    per_clk = r.tc_tf32;
  else if (kind == "gemm_f16")
    per_clk = r.tc_f16;
  else if (kind == "gemm_bf16")
    per_clk = r.tc_bf16;
  else if (kind == "gemm_fp8")
    per_clk = r.tc_fp8;
  else if (kind == "gemm_int8")
    per_clk = r.tc_int8;
  if (per_clk <= 0 || d.sm_count <= 0 || d.sm_clock_khz <= 0) return std::nullopt;
  return per_clk * d.sm_count * d.sm_clock_khz * 1e3;
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
