// FLOP and byte counts by construction, the theoretical ceilings and the statistics helpers.
#include "bench/counts.h"
#include "bench/device.h"
#include "bench/stats.h"
#include "bench/suite.h"
#include "bench/telemetry.h"

#include <gtest/gtest.h>

namespace gpuopt::bench {
namespace {

TEST(Counts, MemoryKernelsCountReadPlusWrite) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_EQ(copy_count(gib).bytes, 2.0 * gib);
  EXPECT_EQ(copy_count(gib).flops, 0);
  EXPECT_EQ(read_count(gib).bytes, 1.0 * gib);
  EXPECT_EQ(write_count(gib).bytes, 1.0 * gib);
  EXPECT_EQ(transfer_count(12345).bytes, 12345.0);
}

TEST(Counts, FmaKernelCountsChainsAndCombiningAdds) {
  // 1000 threads x 10 iterations x 8 chains x 2 FLOPs + 7 adds per thread.
  EXPECT_EQ(fma_count(FmaKind::F32, 1000, 10).flops, 1000.0 * (10 * 8 * 2 + 7));
  EXPECT_EQ(fma_count(FmaKind::F32, 1000, 10).bytes, 4000.0);
  EXPECT_EQ(fma_count(FmaKind::F16x2, 1000, 10).flops, 1000.0 * (10 * 8 * 4 + 7 * 2));
  EXPECT_EQ(fma_count(FmaKind::F64, 1000, 10).flops, 1000.0 * (10 * 8 * 2 + 7));
  EXPECT_EQ(fma_count(FmaKind::F64, 1000, 10).bytes, 8000.0);
  EXPECT_EQ(kFmaChains, 8);
}

TEST(Counts, RooflineOpsDoExactlyTheRequestedFlops) {
  for (RooflineType t : {RooflineType::F32, RooflineType::F16}) {
    for (int f = 1; f <= 8192; f *= 2) {
      RooflineOps ops;
      ASSERT_TRUE(roofline_ops(t, f, &ops)) << f;
      EXPECT_EQ(roofline_ops_flops(t, ops), f) << roofline_type_name(t) << " f=" << f;
      const WorkCount w = roofline_count(t, 1 << 20, f);
      EXPECT_EQ(w.flops, double(1 << 20) * f);
      EXPECT_EQ(w.bytes, double(1 << 20) * 8);
      EXPECT_DOUBLE_EQ(w.intensity(), f / 8.0);
    }
  }
  RooflineOps ops;
  ASSERT_TRUE(roofline_ops(RooflineType::F32, 1, &ops));
  EXPECT_EQ(ops.scalar_muls, 1);
  EXPECT_EQ(ops.fmas, 0);
  ASSERT_TRUE(roofline_ops(RooflineType::F32, 8192, &ops));
  EXPECT_EQ(ops.fmas, 4096);
  ASSERT_TRUE(roofline_ops(RooflineType::F16, 2, &ops));
  EXPECT_EQ(ops.vector_muls, 1);
  ASSERT_TRUE(roofline_ops(RooflineType::F16, 8192, &ops));
  EXPECT_EQ(ops.fmas, 2048);  // half2 FMA = 4 FLOPs
  EXPECT_FALSE(roofline_ops(RooflineType::F32, 3, &ops));
  EXPECT_FALSE(roofline_ops(RooflineType::F32, 0, &ops));
  EXPECT_FALSE(roofline_ops(RooflineType::F16, 16384, &ops));
  EXPECT_EQ(roofline_count(RooflineType::F32, 100, 3).flops, 0);
}

TEST(Counts, IntensitySweepCoversEighthTo1024) {
  const auto v = roofline_intensities();
  ASSERT_EQ(v.size(), 14u);
  EXPECT_EQ(v.front(), 0.125);
  EXPECT_EQ(v.back(), 1024);
  EXPECT_EQ(roofline_flops_for_intensity(0.125), 1);
  EXPECT_EQ(roofline_flops_for_intensity(1024), 8192);
  EXPECT_EQ(roofline_flops_for_intensity(3), 0);
  EXPECT_EQ(intensity_label(0.125), "1/8");
  EXPECT_EQ(intensity_label(64), "64");
}

TEST(Counts, GemmIsTwoMnkAndEachOperandOnce) {
  const WorkCount w = gemm_count(2, 3, 4, 2, 4);
  EXPECT_EQ(w.flops, 48);
  EXPECT_EQ(w.bytes, (2 * 4 + 4 * 3) * 2 + 2 * 3 * 4);
  EXPECT_EQ(gemm_count(8192, 8192, 8192, 2, 2).flops, 2.0 * 8192 * 8192 * 8192);
  EXPECT_EQ(gemm_in_bytes(GemmType::FP8), 1);
  EXPECT_EQ(gemm_out_bytes(GemmType::INT8), 4);
  EXPECT_EQ(gemm_out_bytes(GemmType::BF16), 2);
}

DeviceInfo h200_like() {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.sm_count = 132;
  d.sm_clock_khz = 1980000;
  d.mem_clock_khz = 3201000;
  d.mem_bus_width_bits = 6144;
  return d;
}

TEST(Device, TheoreticalCeilingsFromClocksAndUnits) {
  const DeviceInfo d = h200_like();
  EXPECT_DOUBLE_EQ(theoretical_bandwidth(d), 3201e6 * 2 * 768);
  EXPECT_DOUBLE_EQ(*theoretical_peak(d, "gemm_bf16"), 4096.0 * 132 * 1.98e9);
  EXPECT_DOUBLE_EQ(*theoretical_peak(d, "f32"), 256.0 * 132 * 1.98e9);
  EXPECT_DOUBLE_EQ(*theoretical_peak(d, "gemm_fp8"), 2 * *theoretical_peak(d, "gemm_f16"));
  EXPECT_FALSE(theoretical_peak(d, "gemm_nonsense"));
  DeviceInfo old = d;
  old.cc_major = 6;
  EXPECT_FALSE(theoretical_peak(old, "f32"));
  DeviceInfo a100 = d;
  a100.cc_major = 8;
  EXPECT_FALSE(theoretical_peak(a100, "gemm_fp8"));  // Ampere has no fp8
  EXPECT_EQ(device_to_json(d)["compute_capability"], "9.0");
}

TEST(Stats, MedianMinMax) {
  auto t = summarize({3, 1, 2});
  EXPECT_EQ(t.median, 2);
  EXPECT_EQ(t.min, 1);
  EXPECT_EQ(t.max, 3);
  EXPECT_EQ(t.count, 3);
  EXPECT_EQ(summarize({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(Stats, CrossoverIsWhereTheGpuStaysAhead) {
  EXPECT_EQ(crossover_index({10, 10, 10, 10}, {20, 5, 20, 5}), 3);
  EXPECT_EQ(crossover_index({10, 10, 10}, {20, 5, 5}), 1);
  EXPECT_EQ(crossover_index({1, 1}, {2, 2}), -1);
  EXPECT_EQ(crossover_index({}, {}), -1);
}

TEST(Suite, ParsesSizes) {
  auto s = parse_byte_sizes("1M,64K,2G,4096");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{1 << 20, 64 << 10, uint64_t{2} << 30, 4096}));
  EXPECT_FALSE(parse_byte_sizes("1M,,2M").ok());
  EXPECT_FALSE(parse_byte_sizes("12Q").ok());
  EXPECT_FALSE(parse_byte_sizes("0").ok());
  auto n = parse_ints("256,1024");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, (std::vector<int>{256, 1024}));
  EXPECT_FALSE(parse_ints("256,-3").ok());
  EXPECT_FALSE(parse_ints("x").ok());
  SuiteOptions o;
  apply_defaults(&o);
  EXPECT_EQ(o.memory_sizes.front(), uint64_t{1} << 20);
  EXPECT_EQ(o.memory_sizes.back(), uint64_t{4} << 30);
  EXPECT_EQ(o.gemm_sizes.front(), 1024);
  EXPECT_EQ(o.gemm_sizes.back(), 16384);
  EXPECT_EQ(o.gemm_types.size(), 6u);
}

TEST(Telemetry, PciBusIdsCompareAcrossDomainWidths) {
  EXPECT_TRUE(same_pci_bus_id("00000000:19:00.0", "0000:19:00.0"));
  EXPECT_TRUE(same_pci_bus_id("0000:1A:00.0", "00000000:1a:00.0"));
  EXPECT_FALSE(same_pci_bus_id("0000:19:00.0", "0000:1a:00.0"));
  EXPECT_FALSE(same_pci_bus_id("0001:19:00.0", "0000:19:00.0"));
  EXPECT_FALSE(same_pci_bus_id("", "0000:19:00.0"));
  // Without a bus id there is nothing to read: every field stays n/a.
  const TelemetryReader r = TelemetryReader::open("");
  EXPECT_FALSE(r.available());
  EXPECT_FALSE(r.sample().sm_clock_mhz);
}

}  // namespace
}  // namespace gpuopt::bench
