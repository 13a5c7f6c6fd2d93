// Per-architecture throughput table (by compute capability) and the theoretical peaks derived
// from it for one device: memory bandwidth and FLOP/s per precision.
//
//   GpuProps p{.cc_major = 9, .cc_minor = 0, .sm_count = 132, .sm_clock_mhz = 1980,
//              .mem_clock_mhz = 3201, .mem_bus_width_bits = 6144};
//   DeviceSpec s = spec_for(p);
//   s.peak(PeakPrecision::BF16);      // FLOP/s, dense; nullopt when the tensor cores lack BF16
//   s.mem_bandwidth_bytes_per_s;  // bus/8 * clock * data rate
//
// Peaks are at the clock given (the max SM clock): NVIDIA's datasheet tensor figures for
// H100/H200 SXM assume 1830 MHz, so they come out ~8% below the value at 1980 MHz; peak_at()
// derives them at any clock.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace gpuopt {

enum class Arch { Unknown, Turing, Ampere, Ada, Hopper, Blackwell };
const char* arch_name(Arch a);

enum class PeakPrecision { FP32, TF32, FP16, BF16, FP8, INT8 };
constexpr int kNumPrecisions = 6;
constexpr std::array<PeakPrecision, kNumPrecisions> kAllPrecisions = {PeakPrecision::FP32, PeakPrecision::TF32, PeakPrecision::FP16,
                                                                  PeakPrecision::BF16, PeakPrecision::FP8,  PeakPrecision::INT8};
const char* peak_precision_name(PeakPrecision p);  // "fp32", "tf32", ...

struct ArchSpec {
  Arch arch = Arch::Unknown;
  const char* name = "unknown";  // "Hopper"
  const char* chips = "";        // "GH100" — for people reading `info`
  int cc_major = 0;
  int cc_minor_lo = 0, cc_minor_hi = 0;  // inclusive range of minor versions
  int fp32_cores_per_sm = 0;             // "CUDA cores"
  int tensor_core_gen = 0;               // 0: none
  // Dense operations per clock per SM: FP32 is the non-tensor FMA rate (2 x cores); the rest
  // are tensor-core rates with FP32 accumulate where that is the data-centre rate. 0 = not
  // supported by this architecture's tensor cores.
  std::array<double, kNumPrecisions> ops_per_clock_per_sm{};
  // Bytes per bus-bit per memory clock as NVML/CUDA report the clock (2 for HBM2/2e/3/3e and for
  // GDDR6/6X/7, whose reported clock is already the command rate).
  double mem_data_rate = 2.0;
};

// The row for a compute capability; nullptr for architectures not in the table.
const ArchSpec* arch_spec(int cc_major, int cc_minor);

// What the derivation needs, from the CUDA runtime or NVML.
struct GpuProps {
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  double sm_clock_mhz = 0;   // max SM clock
  double mem_clock_mhz = 0;  // max memory clock
  int mem_bus_width_bits = 0;
};

struct DeviceSpec {
  const ArchSpec* arch = nullptr;  // nullptr: unknown architecture, no peaks
  int cuda_cores = 0;              // sm_count * fp32 cores per SM
  double sm_clock_mhz = 0;         // the clock the peaks are computed at
  std::optional<double> mem_bandwidth_bytes_per_s;
  std::array<std::optional<double>, kNumPrecisions> peak_ops{};  // FLOP/s (INT8: OP/s), dense

  std::optional<double> peak(PeakPrecision p) const { return peak_ops[static_cast<int>(p)]; }
  // The same precision at another clock (e.g. a datasheet's boost clock).
  std::optional<double> peak_at(PeakPrecision p, double sm_clock_mhz) const;

  int sm_count = 0;
};

DeviceSpec spec_for(const GpuProps& props);

}  // namespace gpuopt
