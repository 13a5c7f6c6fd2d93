// The per-architecture table. Sources: NVIDIA architecture whitepapers (Turing, GA100, GA102,
// AD102, GH100, Blackwell) — per-SM dense rates; checked against datasheets in
// tests/gpu/spec_table_test.cpp (T4, A100, A40, L40S, H100/H200 SXM, RTX PRO 6000, B200).
#include "monitor/spec_table.h"

namespace gpuopt {
namespace {

//                           FP32  TF32   FP16   BF16   FP8    INT8
constexpr ArchSpec kTable[] = {
    {Arch::Turing, "Turing", "TU10x", 7, 5, 5, 64, 2, {128, 0, 1024, 0, 0, 2048}, 2.0},
    // GA100 (A100/A30): big tensor cores, 64 FP32 lanes per SM.
    {Arch::Ampere, "Ampere", "GA100", 8, 0, 0, 64, 3, {128, 1024, 2048, 2048, 0, 4096}, 2.0},
    // GA10x (A10/A40/RTX 30, Orin): doubled FP32 lanes, half-size tensor cores.
    {Arch::Ampere, "Ampere", "GA10x", 8, 6, 7, 128, 3, {256, 512, 1024, 1024, 0, 2048}, 2.0},
    {Arch::Ada, "Ada Lovelace", "AD10x", 8, 9, 9, 128, 4, {256, 512, 1024, 1024, 2048, 2048}, 2.0},
    {Arch::Hopper, "Hopper", "GH100", 9, 0, 0, 128, 4, {256, 2048, 4096, 4096, 8192, 8192}, 2.0},
    // Data-centre Blackwell (B200/GB200 10.0, B300 10.3).
    {Arch::Blackwell, "Blackwell", "GB100/GB110", 10, 0, 3, 128, 5, {256, 4096, 8192, 8192, 16384, 16384}, 2.0},
    // Jetson Thor (11.0) and RTX Blackwell (RTX 50, RTX PRO; 12.x): Ada-sized tensor cores.
    {Arch::Blackwell, "Blackwell", "GB20x", 11, 0, 0, 128, 5, {256, 512, 1024, 1024, 2048, 2048}, 2.0},
    {Arch::Blackwell, "Blackwell", "GB20x", 12, 0, 1, 128, 5, {256, 512, 1024, 1024, 2048, 2048}, 2.0},
};

}  // namespace

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Unknown: return "unknown";
    case Arch::Turing: return "Turing";
    case Arch::Ampere: return "Ampere";
    case Arch::Ada: return "Ada Lovelace";
    case Arch::Hopper: return "Hopper";
    case Arch::Blackwell: return "Blackwell";
  }
  return "unknown";
}

const char* peak_precision_name(PeakPrecision p) {
  switch (p) {
    case PeakPrecision::FP32: return "fp32";
    case PeakPrecision::TF32: return "tf32";
    case PeakPrecision::FP16: return "fp16";
    case PeakPrecision::BF16: return "bf16";
    case PeakPrecision::FP8: return "fp8";
    case PeakPrecision::INT8: return "int8";
  }
  return "?";
}

const ArchSpec* arch_spec(int cc_major, int cc_minor) {
  for (const auto& row : kTable)
    if (row.cc_major == cc_major && cc_minor >= row.cc_minor_lo && cc_minor <= row.cc_minor_hi) return &row;
  return nullptr;
}

std::optional<double> DeviceSpec::peak_at(PeakPrecision p, double clock_mhz) const {
  if (!arch || sm_count <= 0 || clock_mhz <= 0) return std::nullopt;
  double per_clk = arch->ops_per_clock_per_sm[static_cast<int>(p)];
  if (per_clk <= 0) return std::nullopt;
  return per_clk * sm_count * clock_mhz * 1e6;
}

DeviceSpec spec_for(const GpuProps& props) {
  DeviceSpec s;
  s.arch = arch_spec(props.cc_major, props.cc_minor);
  s.sm_count = props.sm_count;
  s.sm_clock_mhz = props.sm_clock_mhz;
  if (props.mem_bus_width_bits > 0 && props.mem_clock_mhz > 0) {
    double rate = s.arch ? s.arch->mem_data_rate : 2.0;
    s.mem_bandwidth_bytes_per_s = props.mem_bus_width_bits / 8.0 * props.mem_clock_mhz * 1e6 * rate;
  }
  if (!s.arch) return s;
  s.cuda_cores = props.sm_count * s.arch->fp32_cores_per_sm;
  for (PeakPrecision p : kAllPrecisions) s.peak_ops[static_cast<int>(p)] = s.peak_at(p, props.sm_clock_mhz);
  return s;
}

}  // namespace gpuopt
