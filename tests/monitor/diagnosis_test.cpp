// Each diagnosis rule driven by a scripted sequence of samples: it fires on the pattern it names
// and stays quiet on a nearby pattern that must not trigger it.
#include "monitor/diagnosis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

namespace gpuopt::gpu {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A healthy, busy GPU: 95% util, 40% memory, no throttling, no errors.
GpuSample healthy(const DeviceInfo* info) {
  GpuSample g;
  g.info = info;
  g.gpu_util_pct = 95;
  g.mem_util_pct = 40;
  g.mem_total_bytes = 100 * kGiB;
  g.mem_used_bytes = 40 * kGiB;
  g.mem_free_bytes = 60 * kGiB;
  g.mem_reserved_bytes = 0;
  g.temp_gpu_c = 60;
  g.power_w = 400;
  g.power_limit_w = 700;
  g.clock_event_reasons = 0;
  g.ecc_corrected_volatile = 0;
  g.ecc_uncorrected_volatile = 0;
  g.xid_count = 0;
  g.pcie_tx_kbps = 1000;
  g.pcie_rx_kbps = 1000;
  g.processes.resize(1);
  g.processes[0].pid = 1234;
  return g;
}

struct Script {
  DeviceInfo info;
  Diagnoser diag;
  explicit Script(DiagnosisConfig c = {}) : diag(c) { info.index = 3; }
  // Adds n samples, each `healthy` modified by edit(sample, i).
  void run(int n, const std::function<void(GpuSample&, int)>& edit) {
    for (int i = 0; i < n; ++i) {
      Snapshot s;
      s.gpus.push_back(healthy(&info));
      edit(s.gpus[0], i);
      diag.add(s);
    }
  }
  std::vector<Rule> rules() const {
    std::vector<Rule> r;
    for (const auto& f : diag.findings()) r.push_back(f.rule);
    return r;
  }
  const Finding* find(Rule rule) const {
    static std::vector<Finding> keep;
    keep = diag.findings();
    for (const auto& f : keep)
      if (f.rule == rule) return &f;
    return nullptr;
  }
};

bool has(const std::vector<Rule>& v, Rule r) { return std::find(v.begin(), v.end(), r) != v.end(); }

TEST(Diagnosis, HealthyBusyGpuHasNoWarnings) {
  Script s;
  s.run(30, [](GpuSample&, int) {});
  for (const auto& f : s.diag.findings()) EXPECT_EQ(f.severity, Severity::kInfo) << f.title;
  EXPECT_FALSE(has(s.rules(), Rule::kLowUtilization));
}

TEST(Diagnosis, IdleGpuWithNoProcessesIsNotABottleneck) {
  Script s;
  s.run(30, [](GpuSample& g, int) { g.gpu_util_pct = 0; g.processes.clear(); });
  EXPECT_TRUE(s.rules().empty());
}

TEST(Diagnosis, IdleGapsNameTheInputPipeline) {
  Script s;
  // Bursts: 95% for 2 samples, then 0% for 3 — mean 38%, idle 60%.
  s.run(30, [](GpuSample& g, int i) { g.gpu_util_pct = (i % 5) < 2 ? 95 : 0; });
  const Finding* f = s.find(Rule::kIdleGaps);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->gpu, 3u);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->advice.find("input pipeline"), std::string::npos);
  EXPECT_FALSE(has(s.rules(), Rule::kLowUtilization));
}

TEST(Diagnosis, SteadyLowUtilizationNamesBatchSize) {
  Script s;
  s.run(30, [](GpuSample& g, int) { g.gpu_util_pct = 30; });
  const Finding* f = s.find(Rule::kLowUtilization);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("batch size"), std::string::npos);
  EXPECT_NE(f->detail.find("30%"), std::string::npos);
  EXPECT_FALSE(has(s.rules(), Rule::kIdleGaps));
}

TEST(Diagnosis, UtilizationRulesWaitForEnoughSamples) {
  Script s;
  s.run(4, [](GpuSample& g, int) { g.gpu_util_pct = 10; });
  EXPECT_FALSE(has(s.rules(), Rule::kLowUtilization));
  s.run(1, [](GpuSample& g, int) { g.gpu_util_pct = 10; });
  EXPECT_TRUE(has(s.rules(), Rule::kLowUtilization));
}

TEST(Diagnosis, LowUtilizationClearsWhenTheWindowMovesOn) {
  DiagnosisConfig c;
  c.window = 10;
  Script s(c);
  s.run(10, [](GpuSample& g, int) { g.gpu_util_pct = 10; });
  EXPECT_TRUE(has(s.rules(), Rule::kLowUtilization));
  s.run(10, [](GpuSample& g, int) { g.gpu_util_pct = 90; });
  EXPECT_FALSE(has(s.rules(), Rule::kLowUtilization));
}

TEST(Diagnosis, MemoryPressureAbove90Percent) {
  Script s;
  s.run(10, [](GpuSample& g, int i) {
    uint64_t used = (i == 7 ? 93 : 60) * kGiB;
    g.mem_used_bytes = used;
    g.mem_free_bytes = 100 * kGiB - used;
  });
  const Finding* f = s.find(Rule::kMemoryPressure);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->detail.find("93%"), std::string::npos);
  EXPECT_NE(f->advice.find("batch size"), std::string::npos);
}

TEST(Diagnosis, MemoryPressureCountsReservedAndGoesCritical) {
  Script s;
  s.run(3, [](GpuSample& g, int) {
    g.mem_used_bytes = 97 * kGiB;
    g.mem_reserved_bytes = 2 * kGiB;
    g.mem_free_bytes = 1 * kGiB;
  });
  const Finding* f = s.find(Rule::kMemoryPressure);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
}

TEST(Diagnosis, NoMemoryPressureAt89Percent) {
  Script s;
  s.run(10, [](GpuSample& g, int) { g.mem_used_bytes = 89 * kGiB; g.mem_free_bytes = 11 * kGiB; });
  EXPECT_FALSE(has(s.rules(), Rule::kMemoryPressure));
}

TEST(Diagnosis, ThermalThrottlingFromClockEventReasons) {
  Script s;
  s.run(10, [](GpuSample& g, int i) {
    g.temp_gpu_c = 88;
    g.clock_event_reasons = (i % 2) ? static_cast<uint64_t>(kClockEventHwThermal) : 0;
  });
  const Finding* f = s.find(Rule::kThermalThrottling);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->detail.find("50%"), std::string::npos);
  EXPECT_NE(f->detail.find("88 C"), std::string::npos);
  EXPECT_FALSE(has(s.rules(), Rule::kPowerThrottling));
}

TEST(Diagnosis, RareThrottleSamplesDoNotFire) {
  Script s;
  s.run(20, [](GpuSample& g, int i) { g.clock_event_reasons = i == 3 ? static_cast<uint64_t>(kClockEventSwThermal) : 0; });
  EXPECT_FALSE(has(s.rules(), Rule::kThermalThrottling));
}

TEST(Diagnosis, PowerCapIsAWarningAndPowerBrakeCritical) {
  Script cap;
  cap.run(10, [](GpuSample& g, int) { g.clock_event_reasons = kClockEventSwPowerCap; g.power_w = 699; });
  const Finding* f = cap.find(Rule::kPowerThrottling);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->detail.find("699 W of a 700 W limit"), std::string::npos);

  Script brake;
  brake.run(10, [](GpuSample& g, int) { g.clock_event_reasons = kClockEventHwPowerBrake; });
  f = brake.find(Rule::kPowerThrottling);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
}

TEST(Diagnosis, IdleClockReasonIsNotThrottling) {
  Script s;
  s.run(10, [](GpuSample& g, int) { g.clock_event_reasons = kClockEventGpuIdle; });
  EXPECT_FALSE(has(s.rules(), Rule::kThermalThrottling));
  EXPECT_FALSE(has(s.rules(), Rule::kPowerThrottling));
}

TEST(Diagnosis, PcieBoundWhenTrafficHighAndSmsIdle) {
  Script s;
  s.run(10, [](GpuSample& g, int) {
    g.pcie_tx_kbps = 6'000'000;  // ~6.1 GB/s each way
    g.pcie_rx_kbps = 6'000'000;
    g.gpu_util_pct = 20;
  });
  const Finding* f = s.find(Rule::kPcieBound);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("pinned memory"), std::string::npos);
}

TEST(Diagnosis, PcieBusyWithBusySmsIsNotPcieBound) {
  Script s;
  s.run(10, [](GpuSample& g, int) {
    g.pcie_tx_kbps = 6'000'000;
    g.pcie_rx_kbps = 6'000'000;
    g.gpm.sm_active = 0.9;
  });
  EXPECT_FALSE(has(s.rules(), Rule::kPcieBound));
}

TEST(Diagnosis, PcieBoundPrefersGpmSmActivityAndBytes) {
  Script s;
  s.run(10, [](GpuSample& g, int) {
    g.gpu_util_pct = 90;  // util says busy, but the SMs are mostly idle
    g.gpm.sm_active = 0.1;
    g.gpm.pcie_tx_bytes_per_s = 20e9;
    g.gpm.pcie_rx_bytes_per_s = 1e9;
  });
  const Finding* f = s.find(Rule::kPcieBound);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->detail.find("21.0 GB/s"), std::string::npos);
}

TEST(Diagnosis, MemoryBoundVsComputeBoundFromGpm) {
  Script mem;
  mem.run(10, [](GpuSample& g, int) {
    g.gpm.sm_active = 0.8;
    g.gpm.dram_active = 0.85;
    g.gpm.tensor_active = 0.1;
    g.gpm.fp32_active = 0.2;
  });
  EXPECT_TRUE(has(mem.rules(), Rule::kMemoryBound));
  EXPECT_FALSE(has(mem.rules(), Rule::kComputeBound));

  Script tc;
  tc.run(10, [](GpuSample& g, int) {
    g.gpm.sm_active = 0.9;
    g.gpm.dram_active = 0.3;
    g.gpm.tensor_active = 0.7;
  });
  const Finding* f = tc.find(Rule::kComputeBound);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("tensor"), std::string::npos);
  EXPECT_FALSE(has(tc.rules(), Rule::kMemoryBound));

  Script fp32;
  fp32.run(10, [](GpuSample& g, int) {
    g.gpm.sm_active = 0.9;
    g.gpm.dram_active = 0.2;
    g.gpm.tensor_active = 0.0;
    g.gpm.fp32_active = 0.8;
  });
  f = fp32.find(Rule::kComputeBound);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("TF32"), std::string::npos);
}

TEST(Diagnosis, NoBoundednessVerdictWithoutGpm) {
  Script s;
  s.run(10, [](GpuSample&, int) {});
  EXPECT_FALSE(has(s.rules(), Rule::kMemoryBound));
  EXPECT_FALSE(has(s.rules(), Rule::kComputeBound));
}

TEST(Diagnosis, UncorrectableEccIsCritical) {
  Script s;
  s.run(5, [](GpuSample& g, int i) { g.ecc_uncorrected_volatile = i >= 3 ? 2 : 0; });
  const Finding* f = s.find(Rule::kEccErrors);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(s.diag.findings().front().rule, Rule::kEccErrors);  // most severe first
}

TEST(Diagnosis, CorrectableEccOnlyWhenIncreasing) {
  Script flat;
  flat.run(10, [](GpuSample& g, int) { g.ecc_corrected_volatile = 17; });  // old errors, no new ones
  EXPECT_FALSE(has(flat.rules(), Rule::kEccErrors));

  Script rising;
  rising.run(10, [](GpuSample& g, int i) { g.ecc_corrected_volatile = 17 + (i >= 5 ? 3 : 0); });
  const Finding* f = rising.find(Rule::kEccErrors);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->detail.find("3 new"), std::string::npos);
}

TEST(Diagnosis, XidEventsInTheWindowNameTheCode) {
  DiagnosisConfig c;
  c.window = 5;
  Script s(c);
  s.run(3, [](GpuSample& g, int i) {
    g.xid_count = i >= 1 ? 1 : 0;
    if (i >= 1) g.last_xid = 79;
  });
  const Finding* f = s.find(Rule::kXidErrors);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_NE(f->detail.find("fallen off the bus"), std::string::npos);
  EXPECT_NE(f->detail.find("1 XID"), std::string::npos);
  // Five quiet samples later the event has left the window.
  s.run(5, [](GpuSample& g, int) { g.xid_count = 1; g.last_xid = 79; });
  EXPECT_FALSE(has(s.rules(), Rule::kXidErrors));
}

TEST(Diagnosis, LostGpuIsCriticalAndAlone) {
  Script s;
  s.run(3, [](GpuSample& g, int i) {
    if (i == 2) {
      GpuSample lost;
      lost.info = g.info;
      lost.lost = true;
      g = lost;
    }
  });
  auto r = s.rules();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], Rule::kGpuLost);
}

TEST(Diagnosis, MemoryHeadroomOnBusyGpu) {
  Script s;
  s.run(10, [](GpuSample& g, int) { g.mem_used_bytes = 20 * kGiB; g.mem_free_bytes = 80 * kGiB; });
  const Finding* f = s.find(Rule::kMemoryHeadroom);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kInfo);
}

TEST(Diagnosis, FieldsNotAvailableRaiseNothing) {
  Script s;
  s.run(10, [](GpuSample& g, int) {  // every field n/a
    GpuSample empty;
    empty.info = g.info;
    g = empty;
  });
  EXPECT_TRUE(s.rules().empty());
}

TEST(Diagnosis, TwoGpusAreJudgedSeparately) {
  DeviceInfo a, b;
  a.index = 0, b.index = 1;
  Diagnoser d;
  for (int i = 0; i < 10; ++i) {
    Snapshot s;
    s.gpus.push_back(healthy(&a));
    s.gpus.push_back(healthy(&b));
    s.gpus[1].gpu_util_pct = 10;
    d.add(s);
  }
  auto f = d.findings();
  ASSERT_FALSE(f.empty());
  for (const auto& x : f)
    if (x.rule == Rule::kLowUtilization) { EXPECT_EQ(x.gpu, 1u); }
  EXPECT_TRUE(std::any_of(f.begin(), f.end(), [](const Finding& x) { return x.rule == Rule::kLowUtilization; }));
}

TEST(Diagnosis, RuleNamesAreUniqueLabelValues) {
  std::set<std::string> names;
  for (size_t r = 0; r < kRuleCount; ++r) names.insert(rule_name(Rule(r)));
  EXPECT_EQ(names.size(), kRuleCount);
  EXPECT_EQ(xid_text(48), "XID 48: double-bit ECC error");
  EXPECT_EQ(xid_text(12345), "XID 12345");
}

}  // namespace
}  // namespace gpuopt::gpu
