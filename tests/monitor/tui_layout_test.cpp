// The monitor's screen layout without a terminal: every row exactly the width, panels and bars
// where they belong, compact mode for many GPUs, n/a for missing fields, lost GPUs.
#include "monitor/tui_layout.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace gpuopt::gpu {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

struct Fixture {
  std::vector<DeviceInfo> infos;
  Snapshot snap;
  explicit Fixture(int gpus) {
    infos.resize(gpus);
    for (int i = 0; i < gpus; ++i) {
      infos[i].index = unsigned(i);
      infos[i].name = "NVIDIA H200";
      infos[i].sm_clock_max_mhz = 1980;
    }
    snap.sequence = 3;
    for (int i = 0; i < gpus; ++i) {
      GpuSample g;
      g.info = &infos[i];
      g.gpu_util_pct = 50;
      g.mem_total_bytes = 100 * kGiB;
      g.mem_used_bytes = 25 * kGiB;
      g.mem_free_bytes = 75 * kGiB;
      g.temp_gpu_c = 41;
      g.power_w = 300;
      g.power_limit_w = 700;
      g.sm_clock_mhz = 1500;
      g.processes_available = true;
      snap.gpus.push_back(g);
    }
  }
};

TEST(TuiLayout, BarAndSparkline) {
  EXPECT_EQ(bar(0.5, 12), "[|||||     ]");
  EXPECT_EQ(bar(0.0, 6), "[    ]");
  EXPECT_EQ(bar(1.7, 6), "[||||]");  // clamped
  EXPECT_EQ(bar(std::nullopt, 9), "[  n/a  ]");
  EXPECT_EQ(sparkline({0, 50, 100, -1}, 6), "   +@?");  // any activity shows (ceil)
  EXPECT_EQ(sparkline({10, 20, 30}, 2), ":-");  // newest kept
}

TEST(TuiLayout, OneGpuAt80x24) {
  Fixture f(1);
  ProcessSample p;
  p.pid = 4242;
  p.gpu_memory_bytes = 3 * kGiB;
  p.sm_util_pct = 77;
  std::snprintf(p.user, sizeof p.user, "alice");
  std::snprintf(p.command, sizeof p.command, "python3 train.py --batch 64");
  f.snap.gpus[0].processes.push_back(p);
  f.snap.gpus[0].clock_event_reasons = kClockEventSwPowerCap;
  MonitorView v;
  v.update(f.snap, {Finding{Rule::kPowerThrottling, Severity::kWarning, 0, "power-capped", "100% of samples", "check the limit"}});
  ViewOptions o;
  o.title = "host  driver 580";
  Screen s = v.render(80, 24, o);
  ASSERT_EQ(s.rows.size(), 24u);
  for (const auto& r : s.rows) EXPECT_EQ(r.size(), 80u);
  EXPECT_EQ(s.rows[0].rfind("gpuopt monitor  host  driver 580", 0), 0u);
  EXPECT_EQ(s.rows[1].rfind("GPU 0 NVIDIA H200", 0), 0u);
  EXPECT_NE(s.rows[1].find("41C 300/700W SM 1500/1980MHz PWR-CAP"), std::string::npos) << s.rows[1];
  EXPECT_NE(s.rows[2].find("UTIL [|||||"), std::string::npos) << s.rows[2];
  EXPECT_NE(s.rows[2].find(" 50%"), std::string::npos);
  EXPECT_NE(s.rows[2].find("25.0/100.0G"), std::string::npos);
  EXPECT_EQ(s.rows[3].rfind(" hist ", 0), 0u);
  EXPECT_NE(s.rows[4].find("PID"), std::string::npos);
  EXPECT_NE(s.rows[5].find("4242 alice"), std::string::npos) << s.rows[5];
  EXPECT_NE(s.rows[5].find("3072MiB   77 python3 train.py --batch 64"), std::string::npos) << s.rows[5];
  std::string text = s.text();
  EXPECT_NE(text.find("DIAGNOSIS"), std::string::npos);
  EXPECT_NE(text.find("* GPU 0 power-capped: 100% of samples"), std::string::npos);
  EXPECT_NE(text.find("-> check the limit"), std::string::npos);
  EXPECT_EQ(s.rows[23].rfind("q quit", 0), 0u);
  EXPECT_EQ(s.colors[1][0], Color::kHeader);
}

TEST(TuiLayout, MissingFieldsShowNa) {
  Fixture f(1);
  GpuSample& g = f.snap.gpus[0];
  GpuSample empty;
  empty.info = g.info;
  g = empty;
  MonitorView v;
  v.update(f.snap, {});
  Screen s = v.render(80, 24, {});
  EXPECT_NE(s.rows[1].find("n/a n/a/n/aW SM n/a/1980MHz"), std::string::npos) << s.rows[1];
  EXPECT_NE(s.rows[2].find("n/a"), std::string::npos);
  EXPECT_NE(s.text().find("process list not available"), std::string::npos);
}

TEST(TuiLayout, EightGpusGoCompactAndAllShow) {
  Fixture f(8);
  MonitorView v;
  v.update(f.snap, {});
  Screen s = v.render(80, 24, {});
  for (int i = 0; i < 8; ++i) {
    char want[8];
    std::snprintf(want, sizeof want, "%2d [", i);
    EXPECT_EQ(s.rows[1 + i].rfind(want, 0), 0u) << s.rows[1 + i];
    EXPECT_NE(s.rows[1 + i].find("25.0/100.0G"), std::string::npos) << s.rows[1 + i];
  }
  EXPECT_NE(s.text().find("DIAGNOSIS"), std::string::npos);
}

TEST(TuiLayout, TooManyGpusSaysSo) {
  Fixture f(30);
  MonitorView v;
  v.update(f.snap, {});
  Screen s = v.render(80, 24, {});
  EXPECT_NE(s.text().find("more GPU(s): enlarge the terminal"), std::string::npos);
  for (const auto& r : s.rows) EXPECT_EQ(r.size(), 80u);
}

TEST(TuiLayout, LostGpuAndTinyTerminal) {
  Fixture f(2);
  f.snap.gpus[1].lost = true;
  MonitorView v;
  v.update(f.snap, {});
  Screen s = v.render(80, 24, {});
  EXPECT_NE(s.text().find("LOST: not answering NVML"), std::string::npos);
  Screen tiny = v.render(20, 5, {});  // must not crash or overflow
  EXPECT_EQ(tiny.rows.size(), 5u);
  for (const auto& r : tiny.rows) EXPECT_EQ(r.size(), 20u);
}

TEST(TuiLayout, ProcessSortOrders) {
  Fixture f(1);
  for (unsigned pid : {1u, 2u, 3u}) {
    ProcessSample p;
    p.pid = pid;
    p.gpu_memory_bytes = pid * kGiB;      // 3 has most memory
    p.sm_util_pct = 100 - pid * 30;       // 1 is busiest
    f.snap.gpus[0].processes.push_back(p);
  }
  auto by_mem = sorted_processes(f.snap, ProcessSort::kMemory);
  auto by_util = sorted_processes(f.snap, ProcessSort::kUtilization);
  EXPECT_EQ(by_mem[0].second->pid, 3u);
  EXPECT_EQ(by_util[0].second->pid, 1u);
}

TEST(TuiLayout, OnceTable) {
  Fixture f(1);
  std::string t = render_once(f.snap, {}, ProcessSort::kMemory);
  EXPECT_NE(t.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(t.find("25.0 / 100.0 GiB"), std::string::npos);
  EXPECT_NE(t.find("300 / 700 W"), std::string::npos);
  EXPECT_NE(t.find("1500 / 1980 MHz"), std::string::npos);
  EXPECT_NE(t.find("no processes on the GPU(s)"), std::string::npos);
  EXPECT_NE(t.find("no bottleneck found"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt::gpu
