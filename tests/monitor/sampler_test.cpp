// The sampler over the fake NVML: every field read from a scripted device, values that change
// from sample to sample, per-field failures degrading to n/a, processes with /proc details,
// GPM between consecutive samples, XID events and a GPU that falls off the bus.
#include "monitor/sampler.h"

#include "fake_script.h"
#include "monitor/diagnosis.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

namespace gpuopt::gpu {
namespace {

using nlohmann::json;
using testing::FakeNvmlScript;

constexpr uint64_t kMiB = 1ull << 20;

json h200(json extra = json::object()) {
  json d = {
      {"name", "NVIDIA H200"},
      {"uuid", "GPU-11111111-2222-3333-4444-555555555555"},
      {"pci", {{"bus_id", "00000000:19:00.0"}}},
      {"compute_capability", "9.0"},
      {"utilization", {{"gpu", {10, 90, 95}}, {"memory", 40}}},
      {"memory", {{"total", 143771 * kMiB}, {"used", {1000 * kMiB, 2000 * kMiB}}, {"reserved", 771 * kMiB}}},
      {"temperature", 45},
      {"memory_temperature", 52},
      {"power_usage_mw", {123456, 650000}},
      {"enforced_power_limit_mw", 700000},
      {"total_energy_mj", {1000, 2000, 3000}},
      {"clocks", {{"sm", 1980}, {"mem", 2619}}},
      {"max_clocks", {{"sm", 1980}, {"mem", 2619}}},
      {"pcie", {{"tx_kbps", 1000}, {"rx_kbps", 2000}, {"replay_counter", {0, 3}}}},
      {"clocks_event_reasons", {"gpu_idle", "sw_power_cap,hw_thermal_slowdown"}},
      {"ecc", {{"enabled", 1}, {"corrected_volatile", {0, 2}}, {"uncorrected_volatile", 0},
               {"corrected_aggregate", 5}, {"uncorrected_aggregate", 0}}},
      {"mig", {{"current", 0}}},
  };
  d.update(extra);
  return d;
}

TEST(Sampler, ReadsEveryFieldAndFollowsTheScript) {
  FakeNvmlScript script(json{{"driver_version", "580.65.06"}, {"cuda_driver_version", 13000}, {"devices", json::array({h200()})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  SamplerOptions o;
  o.processes = false;
  o.slow_interval_s = 0;  // every group every sample: this test follows each field's sequence
  auto s = Sampler::create(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  ASSERT_EQ(sm.devices().size(), 1u);
  const DeviceInfo& info = sm.devices()[0];
  EXPECT_EQ(info.name, "NVIDIA H200");
  EXPECT_EQ(info.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(info.pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(info.device, "nvidia0");
  EXPECT_EQ(info.cc_major, 9);
  EXPECT_EQ(info.sm_clock_max_mhz, 1980u);
  EXPECT_EQ(sm.driver().driver_version, "580.65.06");
  EXPECT_EQ(sm.driver().cuda_driver_version, "13.0");

  const Snapshot& a = sm.sample();
  ASSERT_EQ(a.gpus.size(), 1u);
  const GpuSample& g = a.gpus[0];
  EXPECT_EQ(a.sequence, 1u);
  EXPECT_EQ(g.gpu_util_pct, 10u);
  EXPECT_EQ(g.mem_util_pct, 40u);
  EXPECT_EQ(g.mem_total_bytes, 143771 * kMiB);
  EXPECT_EQ(g.mem_used_bytes, 1000 * kMiB);
  EXPECT_EQ(g.mem_reserved_bytes, 771 * kMiB);
  EXPECT_EQ(g.mem_free_bytes, (143771 - 1000 - 771) * kMiB);
  EXPECT_EQ(g.temp_gpu_c, 45u);
  EXPECT_EQ(g.temp_mem_c, 52u);
  EXPECT_DOUBLE_EQ(*g.power_w, 123.456);
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 700);
  EXPECT_EQ(g.energy_mj, 1000u);
  EXPECT_EQ(g.sm_clock_mhz, 1980u);
  EXPECT_EQ(g.mem_clock_mhz, 2619u);
  EXPECT_EQ(g.pcie_tx_kbps, 1000u);
  EXPECT_EQ(g.pcie_rx_kbps, 2000u);
  EXPECT_EQ(g.pcie_replay_count, 0u);
  EXPECT_EQ(g.clock_event_reasons, kClockEventGpuIdle);
  EXPECT_EQ(g.ecc_corrected_volatile, 0u);
  EXPECT_EQ(g.ecc_corrected_aggregate, 5u);
  EXPECT_EQ(g.mig_enabled, false);
  EXPECT_FALSE(g.lost);

  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Snapshot& b = sm.sample();
  const GpuSample& g2 = b.gpus[0];
  EXPECT_EQ(b.sequence, 2u);
  EXPECT_GT(b.interval_s, 0.04);
  EXPECT_EQ(g2.gpu_util_pct, 90u);
  EXPECT_EQ(g2.mem_used_bytes, 2000 * kMiB);
  EXPECT_DOUBLE_EQ(*g2.power_w, 650);
  EXPECT_EQ(g2.energy_mj, 2000u);
  EXPECT_EQ(g2.pcie_replay_count, 3u);
  EXPECT_EQ(g2.clock_event_reasons, kClockEventSwPowerCap | kClockEventHwThermal);
  EXPECT_EQ(g2.ecc_corrected_volatile, 2u);
  // Seconds under each reason accumulate whole intervals while the reason holds.
  EXPECT_NEAR(g2.clock_event_seconds[2], b.interval_s, 1e-9);   // sw_power_cap
  EXPECT_EQ(g2.clock_event_seconds[0], 0.0);                     // gpu_idle held only before
  const double b_interval = b.interval_s;  // b and c share the sampler's buffer
  const Snapshot& c = sm.sample();
  EXPECT_EQ(c.gpus[0].gpu_util_pct, 95u);  // last element repeats afterwards
  EXPECT_NEAR(c.gpus[0].clock_event_seconds[2], b_interval + c.interval_s, 1e-9);
}

TEST(Sampler, MissingFieldsAreNotAvailableNotZero) {
  // A bare device: only identity; everything else NOT_SUPPORTED.
  FakeNvmlScript script(json{{"devices", json::array({json{{"name", "Old GPU"}, {"uuid", "GPU-0"}}})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (int i = 0; i < 2; ++i) {
    const GpuSample& g = (*s)->sample().gpus[0];
    EXPECT_FALSE(g.gpu_util_pct);
    EXPECT_FALSE(g.mem_used_bytes);
    EXPECT_FALSE(g.temp_gpu_c);
    EXPECT_FALSE(g.temp_mem_c);
    EXPECT_FALSE(g.power_w);
    EXPECT_FALSE(g.energy_mj);
    EXPECT_FALSE(g.sm_clock_mhz);
    EXPECT_FALSE(g.pcie_tx_kbps);
    EXPECT_FALSE(g.clock_event_reasons);
    EXPECT_FALSE(g.ecc_corrected_volatile);
    EXPECT_FALSE(g.mig_enabled);
    EXPECT_FALSE(g.gpm.sm_active);
    EXPECT_FALSE(g.processes_available);
    EXPECT_FALSE(g.lost);
  }
}

TEST(Sampler, ScriptedFailuresDegradeOneFieldAtATime) {
  json d = h200();
  d["fail"] = {{"nvmlDeviceGetPowerUsage", {"SUCCESS", "UNKNOWN", "SUCCESS"}},
               {"nvmlDeviceGetTemperature", "NOT_SUPPORTED"}};
  FakeNvmlScript script(json{{"devices", json::array({d})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  const GpuSample* g = &sm.sample().gpus[0];
  EXPECT_TRUE(g->power_w);
  EXPECT_FALSE(g->temp_gpu_c);
  EXPECT_EQ(g->gpu_util_pct, 10u);  // the others still read
  g = &sm.sample().gpus[0];
  EXPECT_FALSE(g->power_w);  // a transient error: n/a this time ...
  g = &sm.sample().gpus[0];
  EXPECT_TRUE(g->power_w);   // ... and read again next time
  EXPECT_FALSE(g->temp_gpu_c);
}

TEST(Sampler, GpuFallingOffTheBusIsMarkedLost) {
  json d = h200();
  d["fail"] = {{"nvmlDeviceGetUtilizationRates", {"SUCCESS", "GPU_IS_LOST"}}};
  FakeNvmlScript script(json{{"devices", json::array({d, h200({{"uuid", "GPU-2"}})})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  EXPECT_FALSE(sm.sample().gpus[0].lost);
  const Snapshot& snap = sm.sample();
  EXPECT_TRUE(snap.gpus[0].lost);
  EXPECT_FALSE(snap.gpus[0].mem_used_bytes);
  EXPECT_FALSE(snap.gpus[1].lost);  // the other GPU is unaffected
  EXPECT_TRUE(snap.gpus[1].mem_used_bytes);
  Diagnoser diag;
  diag.add(snap);
  auto f = diag.findings();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].rule, Rule::kGpuLost);
  EXPECT_EQ(f[0].gpu, 0u);
}

TEST(Sampler, ProcessesWithUtilizationAndProcDetails) {
  json d = h200({{"processes",
                  {{"seq",
                    {json::array({{{"pid", ::getpid()}, {"used_memory", 512 * kMiB}, {"sm_util", 40}, {"mem_util", 7}},
                                  {{"pid", 999999}, {"used_memory", 64 * kMiB}, {"type", "graphics"}}}),
                     json::array({{{"pid", ::getpid()}, {"used_memory", 700 * kMiB}, {"sm_util", 55}}})}}}}});
  FakeNvmlScript script(json{{"devices", json::array({d})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({.slow_interval_s = 0});  // process utilisation every sample
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  const GpuSample& g = sm.sample().gpus[0];
  ASSERT_TRUE(g.processes_available);
  ASSERT_EQ(g.processes.size(), 2u);
  const ProcessSample& me = g.processes[0];
  EXPECT_EQ(me.pid, unsigned(::getpid()));
  EXPECT_EQ(me.gpu_memory_bytes, 512 * kMiB);
  EXPECT_EQ(me.sm_util_pct, 40u);
  EXPECT_EQ(me.mem_util_pct, 7u);
  EXPECT_EQ(me.type, 'C');
  EXPECT_NE(std::string(me.command).find("test_monitor"), std::string::npos) << me.command;
  EXPECT_NE(std::string(me.user), "");
  EXPECT_EQ(g.processes[1].type, 'G');
  EXPECT_FALSE(g.processes[1].sm_util_pct);  // the driver gave none for it
  EXPECT_STREQ(g.processes[1].command, "");   // not a process of this machine
  const size_t cap = g.processes.capacity();
  const GpuSample& g2 = sm.sample().gpus[0];
  ASSERT_EQ(g2.processes.size(), 1u);
  EXPECT_EQ(g2.processes[0].gpu_memory_bytes, 700 * kMiB);
  EXPECT_EQ(g2.processes[0].sm_util_pct, 55u);
  EXPECT_EQ(g2.processes.capacity(), cap);  // buffers are reused, not reallocated
}

TEST(Sampler, GpmMetricsBetweenConsecutiveSamples) {
  json d = h200({{"gpm",
                  {{"supported", 1},
                   {"metrics",
                    {{"sm_util", {50, 80}}, {"any_tensor_util", 20}, {"dram_bw_util", 70}, {"fp32_util", 10},
                     {"sm_occupancy", 33}, {"pcie_tx_per_sec", 1024}, {"pcie_rx_per_sec", 512}}}}}});
  FakeNvmlScript script(json{{"devices", json::array({d})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  EXPECT_TRUE(sm.devices()[0].gpm_supported);
  const GpuSample& g1 = sm.sample().gpus[0];
  EXPECT_FALSE(g1.gpm.sm_active);  // one GPM sample: no interval yet
  EXPECT_EQ(g1.pcie_tx_kbps, 1000u);
  const GpuSample& g2 = sm.sample().gpus[0];
  EXPECT_DOUBLE_EQ(*g2.gpm.sm_active, 0.5);
  EXPECT_DOUBLE_EQ(*g2.gpm.tensor_active, 0.2);
  EXPECT_DOUBLE_EQ(*g2.gpm.dram_active, 0.7);
  EXPECT_DOUBLE_EQ(*g2.gpm.fp32_active, 0.1);
  EXPECT_DOUBLE_EQ(*g2.gpm.sm_occupancy, 0.33);
  EXPECT_DOUBLE_EQ(*g2.gpm.pcie_tx_bytes_per_s, 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*g2.gpm.pcie_rx_bytes_per_s, 512.0 * 1024 * 1024);
  EXPECT_FALSE(g2.gpm.fp16_active);
  const GpuSample& g3 = sm.sample().gpus[0];
  EXPECT_DOUBLE_EQ(*g3.gpm.sm_active, 0.8);
  EXPECT_FALSE(g3.pcie_tx_kbps);  // GPM gives PCIe: the 20 ms NVML counter is skipped
}

TEST(Sampler, XidEventsAreCountedPerGpu) {
  json d0 = h200();
  json d1 = h200({{"uuid", "GPU-2"}, {"xid_events", json::array({79, json{{"xid", 48}, {"after_waits", 2}}})}});
  FakeNvmlScript script(json{{"devices", json::array({d0, d1})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Sampler& sm = **s;
  const Snapshot& a = sm.sample();
  EXPECT_EQ(a.gpus[0].xid_count, 0u);
  EXPECT_EQ(a.gpus[1].xid_count, 1u);
  EXPECT_EQ(a.gpus[1].last_xid, 79u);
  uint64_t last = 0, count = 0;
  for (int i = 0; i < 4; ++i) {
    const Snapshot& b = sm.sample();
    last = b.gpus[1].last_xid.value_or(0);
    count = b.gpus[1].xid_count.value_or(0);
  }
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(last, 48u);
}

TEST(Sampler, MigModeAndDevices) {
  json d = h200(json::parse(R"({"mig": {"current": 1, "devices": [{"name": "1g.18gb"}, {"name": "3g.71gb"}]}})"));
  FakeNvmlScript script(json{{"devices", json::array({d})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const GpuSample& g = (*s)->sample().gpus[0];
  EXPECT_EQ(g.mig_enabled, true);
  EXPECT_EQ(g.mig_device_count, 2u);
}

TEST(Sampler, NoDriverIsAClearError) {
  ::setenv("GPUOPT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  auto s = Sampler::create({});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("NVML not found"), std::string::npos) << s.status().message();
}

TEST(Sampler, ThreadDeliversSamplesAtTheInterval) {
  FakeNvmlScript script(json{{"devices", json::array({h200()})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  SamplerOptions o;
  o.interval_s = 0.05;
  auto s = Sampler::create(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::atomic<int> n{0};
  std::atomic<uint64_t> last_seq{0};
  auto t0 = std::chrono::steady_clock::now();
  (*s)->start([&](const Snapshot& snap) {
    ++n;
    last_seq = snap.sequence;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(520));
  (*s)->stop();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(n.load(), 5);
  EXPECT_LE(n.load(), int(elapsed / 0.05) + 2);
  EXPECT_EQ(last_seq.load(), uint64_t(n.load()));
}

}  // namespace
}  // namespace gpuopt::gpu

namespace gpuopt::gpu {
namespace {

// An older driver: no _v2/_v3 symbols, no memory v2 (used includes the reservation), no GPM,
// clock reasons only under their old "throttle" name. Every field still reads or says n/a.
TEST(Sampler, OldDriverFallbacks) {
  json d = h200(json::parse(R"({"gpm": {"supported": 1}, "processes": [{"pid": 77, "used_memory": 5242880}]})"));
  FakeNvmlScript script(json{{"devices", json::array({d})}});
  GPUOPT_REQUIRE_FAKE_NVML(script);
  std::string old = std::getenv("GPUOPT_FAKE_NVML");
  old.replace(old.rfind("libfake_nvml.so"), std::string("libfake_nvml.so").size(), "libfake_nvml_old.so");
  if (!std::filesystem::exists(old)) GTEST_SKIP() << "no " << old;
  ::setenv("GPUOPT_NVML_LIBRARY", old.c_str(), 1);
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE((*s)->devices()[0].gpm_supported);
  (*s)->sample();
  const GpuSample& g = (*s)->sample().gpus[0];
  EXPECT_EQ(g.mem_used_bytes, (2000 + 771) * kMiB);  // v1: reservation counted as used
  EXPECT_FALSE(g.mem_reserved_bytes);
  EXPECT_EQ(g.clock_event_reasons, kClockEventSwPowerCap | kClockEventHwThermal);
  EXPECT_FALSE(g.gpm.sm_active);
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_EQ(g.processes[0].gpu_memory_bytes, 5 * kMiB);
  EXPECT_EQ(g.gpu_util_pct, 90u);
}

}  // namespace
}  // namespace gpuopt::gpu
