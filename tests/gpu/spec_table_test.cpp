// Derived peaks against NVIDIA datasheet figures (independent numbers, not our table restated).
#include "monitor/spec_table.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

// Datasheets round; 1.5% covers their rounding and boost-clock quoting.
void expect_near_rel(std::optional<double> got, double want, const char* what) {
  ASSERT_TRUE(got.has_value()) << what;
  EXPECT_NEAR(*got / want, 1.0, 0.015) << what << ": got " << *got << ", datasheet " << want;
}

TEST(SpecTable, H200SxmAtMaxClock) {
  // What the H200 reports: 132 SMs, max SM clock 1980 MHz, HBM3e at 3201 MHz on a 6144-bit bus.
  DeviceSpec s = spec_for({.cc_major = 9, .cc_minor = 0, .sm_count = 132, .sm_clock_mhz = 1980,
                           .mem_clock_mhz = 3201, .mem_bus_width_bits = 6144});
  ASSERT_NE(s.arch, nullptr);
  EXPECT_EQ(s.arch->arch, Arch::Hopper);
  EXPECT_EQ(s.arch->tensor_core_gen, 4);
  EXPECT_EQ(s.cuda_cores, 16896);
  expect_near_rel(s.peak(PeakPrecision::FP32), 67e12, "FP32");         // datasheet 67 TFLOP/s
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 4.8e12 * 1.025, "HBM3e");  // 4.8 TB/s quoted, 4.92 derived
  // At 1980 MHz the tensor rates are 8% above the datasheet, which quotes them at 1830 MHz.
  expect_near_rel(s.peak(PeakPrecision::BF16), 989.4e12 * 1980 / 1830, "BF16 at 1980");
  expect_near_rel(s.peak_at(PeakPrecision::BF16, 1830), 989.4e12, "BF16 at 1830");
  expect_near_rel(s.peak_at(PeakPrecision::FP16, 1830), 989.4e12, "FP16 at 1830");
  expect_near_rel(s.peak_at(PeakPrecision::FP8, 1830), 1978.9e12, "FP8 at 1830");
  expect_near_rel(s.peak_at(PeakPrecision::INT8, 1830), 1978.9e12, "INT8 at 1830");
  expect_near_rel(s.peak_at(PeakPrecision::TF32, 1830), 494.7e12, "TF32 at 1830");
}

TEST(SpecTable, H100SxmMemory) {
  DeviceSpec s = spec_for({.cc_major = 9, .cc_minor = 0, .sm_count = 132, .sm_clock_mhz = 1980,
                           .mem_clock_mhz = 2619, .mem_bus_width_bits = 5120});
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 3.35e12, "H100 SXM HBM3");
}

TEST(SpecTable, A100Sxm) {
  DeviceSpec s = spec_for({.cc_major = 8, .cc_minor = 0, .sm_count = 108, .sm_clock_mhz = 1410,
                           .mem_clock_mhz = 1593, .mem_bus_width_bits = 5120});
  EXPECT_EQ(s.arch->tensor_core_gen, 3);
  EXPECT_EQ(s.cuda_cores, 6912);
  expect_near_rel(s.peak(PeakPrecision::FP32), 19.5e12, "FP32");
  expect_near_rel(s.peak(PeakPrecision::TF32), 156e12, "TF32");
  expect_near_rel(s.peak(PeakPrecision::BF16), 312e12, "BF16");
  expect_near_rel(s.peak(PeakPrecision::INT8), 624e12, "INT8");
  EXPECT_FALSE(s.peak(PeakPrecision::FP8)) << "Ampere has no FP8 tensor cores";
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 2.039e12, "A100 80GB HBM2e");
}

TEST(SpecTable, A40IsGa10x) {
  DeviceSpec s = spec_for({.cc_major = 8, .cc_minor = 6, .sm_count = 84, .sm_clock_mhz = 1740,
                           .mem_clock_mhz = 7251, .mem_bus_width_bits = 384});
  EXPECT_EQ(s.cuda_cores, 10752);
  expect_near_rel(s.peak(PeakPrecision::FP32), 37.4e12, "FP32");
  expect_near_rel(s.peak(PeakPrecision::FP16), 149.7e12, "FP16");
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 696e9, "GDDR6");
}

TEST(SpecTable, L40sAda) {
  DeviceSpec s = spec_for({.cc_major = 8, .cc_minor = 9, .sm_count = 142, .sm_clock_mhz = 2520,
                           .mem_clock_mhz = 9001, .mem_bus_width_bits = 384});
  EXPECT_EQ(s.arch->arch, Arch::Ada);
  expect_near_rel(s.peak(PeakPrecision::FP32), 91.6e12, "FP32");
  expect_near_rel(s.peak(PeakPrecision::FP8), 733e12, "FP8");
  expect_near_rel(s.peak(PeakPrecision::TF32), 183e12, "TF32");
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 864e9, "GDDR6");
}

TEST(SpecTable, T4Turing) {
  DeviceSpec s = spec_for({.cc_major = 7, .cc_minor = 5, .sm_count = 40, .sm_clock_mhz = 1590,
                           .mem_clock_mhz = 5001, .mem_bus_width_bits = 256});
  EXPECT_EQ(s.arch->tensor_core_gen, 2);
  expect_near_rel(s.peak(PeakPrecision::FP32), 8.1e12, "FP32");
  expect_near_rel(s.peak(PeakPrecision::FP16), 65e12, "FP16");
  expect_near_rel(s.peak(PeakPrecision::INT8), 130e12, "INT8");
  EXPECT_FALSE(s.peak(PeakPrecision::BF16));
  EXPECT_FALSE(s.peak(PeakPrecision::TF32));
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 320e9, "GDDR6");
}

TEST(SpecTable, BlackwellDataCentreAndRtx) {
  DeviceSpec b200 = spec_for({.cc_major = 10, .cc_minor = 0, .sm_count = 148, .sm_clock_mhz = 1965});
  EXPECT_EQ(b200.arch->tensor_core_gen, 5);
  // B200 datasheet: 2.25 PFLOP/s dense BF16, 4.5 dense FP8 (at its tensor clock, ~1.86 GHz).
  expect_near_rel(b200.peak_at(PeakPrecision::BF16, 1856), 2.25e15, "B200 BF16");
  expect_near_rel(b200.peak_at(PeakPrecision::FP8, 1856), 4.5e15, "B200 FP8");
  DeviceSpec rtx = spec_for({.cc_major = 12, .cc_minor = 0, .sm_count = 188, .sm_clock_mhz = 2617});
  expect_near_rel(rtx.peak(PeakPrecision::FP32), 125e12, "RTX PRO 6000 FP32");
}

TEST(SpecTable, UnknownArchitectureHasNoPeaksButBandwidth) {
  DeviceSpec s = spec_for({.cc_major = 7, .cc_minor = 0, .sm_count = 80, .sm_clock_mhz = 1530,
                           .mem_clock_mhz = 877, .mem_bus_width_bits = 4096});
  EXPECT_EQ(s.arch, nullptr);  // Volta is not in the table
  for (PeakPrecision p : kAllPrecisions) EXPECT_FALSE(s.peak(p)) << peak_precision_name(p);
  expect_near_rel(s.mem_bandwidth_bytes_per_s, 898e9, "V100 HBM2");
}

TEST(SpecTable, MissingInputsGiveNoValues) {
  DeviceSpec s = spec_for({.cc_major = 9, .cc_minor = 0});
  EXPECT_NE(s.arch, nullptr);
  EXPECT_FALSE(s.mem_bandwidth_bytes_per_s);
  EXPECT_FALSE(s.peak(PeakPrecision::FP32));
}

}  // namespace
}  // namespace gpuopt
