// Prometheus text exposition: escaping, number forms, and the exporter's rendering of a sample
// with DCGM names and labels (checked line by line against the format's grammar).
#include "monitor/exporter_metrics.h"
#include "monitor/prom_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace gpuopt::gpu {
namespace {

TEST(PromText, EscapesLabelValuesAndHelp) {
  std::string labels;
  prom_label(&labels, "a", "x\"y\\z\nw");
  EXPECT_EQ(labels, R"(a="x\"y\\z\nw")");
  prom_label(&labels, "b", "");
  EXPECT_EQ(labels, R"(a="x\"y\\z\nw",b="")");
  std::string out;
  prom_family(&out, "m", "two\nlines \\ here", PromType::kCounter);
  EXPECT_EQ(out, "# HELP m two\\nlines \\\\ here\n# TYPE m counter\n");
}

TEST(PromText, NumberForms) {
  std::string out;
  prom_sample(&out, "m", "", 42);
  prom_sample(&out, "m", "", 0.25);
  prom_sample(&out, "m", "", 1e20);
  prom_sample(&out, "m", "", std::nan(""));
  prom_sample(&out, "m", "", -INFINITY);
  prom_sample(&out, "m", "", 144384);
  EXPECT_EQ(out, "m 42\nm 0.25\nm 1e+20\nm NaN\nm -Inf\nm 144384\n");
}

TEST(PromText, ExtraLabel) {
  std::string out;
  prom_sample(&out, "m", R"(gpu="0")", "rule", "a\"b", 1);
  prom_sample(&out, "m", "", "rule", "x", 2);
  EXPECT_EQ(out, "m{gpu=\"0\",rule=\"a\\\"b\"} 1\nm{rule=\"x\"} 2\n");
}

TEST(PromText, NameValidation) {
  EXPECT_TRUE(prom_valid_metric_name("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(prom_valid_metric_name("a:b"));
  EXPECT_FALSE(prom_valid_metric_name("1abc"));
  EXPECT_FALSE(prom_valid_label_name("a:b"));
  EXPECT_FALSE(prom_valid_metric_name(""));
}

// Parses exposition text into name{labels} -> value, asserting the grammar on every line and
// that each family's samples are contiguous and follow its TYPE line. Sample timestamps (ms)
// go to *timestamps when given.
std::map<std::string, double> parse_exposition(const std::string& text,
                                               std::map<std::string, int64_t>* timestamps = nullptr) {
  static const std::regex kSample(R"re(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)( -?[0-9]+)?$)re");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|untyped)$)");
  std::map<std::string, double> out;
  std::set<std::string> closed;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.rfind("# TYPE", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, m, kType)) << line;
      if (!current.empty()) closed.insert(current);
      current = m[1];
      EXPECT_FALSE(closed.count(current)) << "family repeated: " << current;
      continue;
    }
    if (line.rfind("#", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, m, kSample)) << line;
    EXPECT_EQ(m[1].str(), current) << "sample outside its family: " << line;
    EXPECT_FALSE(out.count(m[1].str() + "{" + m[3].str() + "}")) << "duplicate series: " << line;
    out[m[1].str() + "{" + m[3].str() + "}"] = std::stod(m[4]);
    if (timestamps && m[5].matched) (*timestamps)[m[1].str() + "{" + m[3].str() + "}"] = std::stoll(m[5].str());
  }
  return out;
}

TEST(ExporterMetrics, RendersDcgmNamesAndLabels) {
  DeviceInfo info;
  info.index = 0;
  info.name = "NVIDIA H200";
  info.uuid = "GPU-1111";
  info.pci_bus_id = "00000000:19:00.0";
  info.device = "nvidia0";
  info.sm_clock_max_mhz = 1980;
  Snapshot s;
  s.sequence = 7;
  s.timestamp_us = 1'700'000'000'000'000;
  GpuSample g;
  g.info = &info;
  g.gpu_util_pct = 87;
  g.mem_util_pct = 31;
  g.mem_total_bytes = 143771ull << 20;
  g.mem_used_bytes = 1000ull << 20;
  g.mem_free_bytes = 142000ull << 20;
  g.mem_reserved_bytes = 771ull << 20;
  g.temp_gpu_c = 41;
  g.power_w = 123.5;
  g.energy_mj = 987654321;
  g.sm_clock_mhz = 1980;
  g.clock_event_reasons = kClockEventSwPowerCap | kClockEventGpuIdle;
  g.clock_event_seconds[2] = 12;
  g.last_xid = 79;
  g.gpm.sm_active = 0.5;
  g.processes_available = true;
  ProcessSample p;
  p.pid = 4242;
  p.gpu_memory_bytes = 512ull << 20;
  std::snprintf(p.command, sizeof p.command, "/usr/bin/python3 train.py --x");
  std::snprintf(p.container_id, sizeof p.container_id, "abc123");
  g.processes.push_back(p);
  s.gpus.push_back(g);

  ExporterInfo ei;
  ei.hostname = "node\"1";
  MetricsRenderer r(ei);
  Finding f{Rule::kPowerThrottling, Severity::kWarning, 0, "t", "d", "a"};
  std::string text = r.render(s, {f});
  auto m = parse_exposition(text);
  std::string L = R"(gpu="0",UUID="GPU-1111",pci_bus_id="00000000:19:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="node\"1")";
  EXPECT_EQ(m["DCGM_FI_DEV_GPU_UTIL{" + L + "}"], 87);
  EXPECT_EQ(m["DCGM_FI_DEV_MEM_COPY_UTIL{" + L + "}"], 31);
  EXPECT_EQ(m["DCGM_FI_DEV_FB_USED{" + L + "}"], 1000);
  EXPECT_EQ(m["DCGM_FI_DEV_FB_FREE{" + L + "}"], 142000);
  EXPECT_EQ(m["DCGM_FI_DEV_FB_RESERVED{" + L + "}"], 771);
  EXPECT_EQ(m["DCGM_FI_DEV_GPU_TEMP{" + L + "}"], 41);
  EXPECT_EQ(m["DCGM_FI_DEV_POWER_USAGE{" + L + "}"], 123.5);
  EXPECT_EQ(m["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" + L + "}"], 987654321);
  EXPECT_EQ(m["DCGM_FI_DEV_SM_CLOCK{" + L + "}"], 1980);
  EXPECT_EQ(m["DCGM_FI_DEV_MAX_SM_CLOCK{" + L + "}"], 1980);
  EXPECT_EQ(m["DCGM_FI_DEV_XID_ERRORS{" + L + "}"], 79);
  EXPECT_EQ(m["DCGM_FI_DEV_CLOCKS_EVENT_REASONS{" + L + "}"], 5);
  EXPECT_EQ(m["DCGM_FI_PROF_SM_ACTIVE{" + L + "}"], 0.5);
  EXPECT_EQ(m["gpuopt_clock_event_reason_active{" + L + R"(,reason="sw_power_cap"})"], 1);
  EXPECT_EQ(m["gpuopt_clock_event_reason_active{" + L + R"(,reason="hw_thermal"})"], 0);
  EXPECT_EQ(m["gpuopt_clock_event_reason_seconds_total{" + L + R"(,reason="sw_power_cap"})"], 12);
  EXPECT_EQ(m["gpuopt_process_gpu_memory_bytes{" + L +
              R"(,pid="4242",process_name="python3",user="",container_id="abc123"})"],
            512.0 * 1024 * 1024);
  EXPECT_EQ(m["gpuopt_diagnosis{" + L + R"(,rule="power_throttling"})"], 2);
  EXPECT_EQ(m["gpuopt_diagnosis{" + L + R"(,rule="memory_pressure"})"], 0);
  EXPECT_EQ(m[R"(gpuopt_exporter_samples_total{Hostname="node\"1"})"], 7);
  // n/a fields are absent, not zero.
  for (const auto& [k, v] : m) {
    EXPECT_EQ(k.rfind("DCGM_FI_DEV_MEMORY_TEMP", 0), std::string::npos) << k;
    EXPECT_EQ(k.rfind("DCGM_FI_PROF_DRAM_ACTIVE", 0), std::string::npos) << k;
    EXPECT_EQ(k.rfind("gpuopt_exporter_no_gpu", 0), std::string::npos) << k;
  }
  // Every rule has a series.
  size_t rules = 0;
  for (const auto& [k, v] : m) rules += k.rfind("gpuopt_diagnosis{", 0) == 0;
  EXPECT_EQ(rules, kRuleCount);
}

TEST(ExporterMetrics, NoGpuStillServesAndSaysWhy) {
  ExporterInfo ei;
  ei.hostname = "h";
  ei.no_gpu_reason = "NVML not found: libnvidia-ml.so.1";
  MetricsRenderer r(ei);
  Snapshot s;
  std::string text = r.render(s, {});
  auto m = parse_exposition(text);
  EXPECT_EQ(m[R"(gpuopt_exporter_no_gpu{Hostname="h",reason="NVML not found: libnvidia-ml.so.1"})"], 1);
  EXPECT_EQ(m[R"(gpuopt_exporter_gpus{Hostname="h"})"], 0);
  EXPECT_NE(text.find("# no GPU series: NVML not found"), std::string::npos);
  for (const auto& [k, v] : m) EXPECT_EQ(k.rfind("DCGM_", 0), std::string::npos) << k;
  bool build = false;
  for (const auto& [k, v] : m) build |= k.rfind("gpuopt_build_info{", 0) == 0;
  EXPECT_TRUE(build);
}

TEST(ExporterMetrics, LostGpuKeepsOnlyTheLostSeries) {
  DeviceInfo info;
  Snapshot s;
  GpuSample g;
  g.info = &info;
  g.lost = true;
  g.gpu_util_pct = 50;  // stale value from before the loss must not be exported
  s.gpus.push_back(g);
  ExporterInfo ei;
  ei.hostname = "h";
  MetricsRenderer r(ei);
  auto m = parse_exposition(r.render(s, {}));
  bool lost = false;
  for (const auto& [k, v] : m) {
    EXPECT_EQ(k.rfind("DCGM_FI_DEV_GPU_UTIL", 0), std::string::npos);
    if (k.rfind("gpuopt_gpu_lost{", 0) == 0) lost = v == 1;
  }
  EXPECT_TRUE(lost);
}

TEST(ExporterMetrics, QueryCostsAndSlowCadenceTimestamps) {
  DeviceInfo info;
  info.name = "NVIDIA H200";
  Snapshot s;
  s.sequence = 20;
  s.timestamp_us = 1'700'000'020'000'000;
  s.slow_every = 10;
  s.sample_seconds_total = 0.375;
  const size_t ecc = size_t(QueryGroup::kEcc), util = size_t(QueryGroup::kUtilization), power = size_t(QueryGroup::kPower);
  s.queries[ecc] = {.calls = 2, .wall_s = 0.25, .cpu_s = 0.125, .slow = true};
  s.queries[util] = {.calls = 20, .wall_s = 0.0625, .cpu_s = 0.03125};
  s.queries[power] = {.calls = 3, .wall_s = 0.0075, .cpu_s = 0.007, .slow = true, .moved = true};
  GpuSample g;
  g.info = &info;
  g.gpu_util_pct = 50;
  g.power_w = 300;
  g.ecc_corrected_volatile = 4;
  g.read_us[util] = s.timestamp_us;
  g.read_us[power] = 1'700'000'013'000'000;
  g.read_us[ecc] = 1'700'000'011'000'500;
  const size_t putil = size_t(QueryGroup::kProcessUtilization);
  s.queries[putil] = {.calls = 2, .wall_s = 0.001, .cpu_s = 0.001, .slow = true};
  g.read_us[putil] = 1'700'000'011'000'000;
  g.processes_available = true;
  ProcessSample p;
  p.pid = 7;
  p.sm_util_pct = 33;
  g.processes.push_back(p);
  s.gpus.push_back(g);
  ExporterInfo ei;
  ei.hostname = "h";
  ei.interval_s = 0.5;
  MetricsRenderer r(ei);
  std::map<std::string, int64_t> ts;
  auto m = parse_exposition(r.render(s, {}), &ts);
  const std::string H = R"(Hostname="h")";
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_calls_total{" + H + R"(,query="ecc"})"], 2);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_seconds_total{" + H + R"(,query="ecc"})"], 0.25);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_cpu_seconds_total{" + H + R"(,query="ecc"})"], 0.125);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_calls_total{" + H + R"(,query="utilization"})"], 20);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_interval_seconds{" + H + R"(,query="ecc"})"], 5);  // 10 x 0.5 s
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_interval_seconds{" + H + R"(,query="utilization"})"], 0.5);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_moved{" + H + R"(,query="power"})"], 1);
  EXPECT_EQ(m["gpuopt_exporter_nvml_query_moved{" + H + R"(,query="ecc"})"], 0);
  EXPECT_EQ(m["gpuopt_exporter_sample_seconds_total{" + H + "}"], 0.375);
  // Groups never read have no series.
  EXPECT_EQ(m.count("gpuopt_exporter_nvml_query_calls_total{" + H + R"(,query="mig"})"), 0u);
  // Slow-cadence series carry their read time in ms; fast ones the scrape's (none).
  std::string L = R"(gpu="0",UUID="",pci_bus_id="",device="",modelName="NVIDIA H200",Hostname="h")";
  EXPECT_EQ(ts["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{" + L + "}"], 1'700'000'011'000);
  EXPECT_EQ(ts["DCGM_FI_DEV_POWER_USAGE{" + L + "}"], 1'700'000'013'000);
  EXPECT_EQ(m["DCGM_FI_DEV_POWER_USAGE{" + L + "}"], 300);
  EXPECT_EQ(ts.count("DCGM_FI_DEV_GPU_UTIL{" + L + "}"), 0u);
  EXPECT_EQ(m["DCGM_FI_DEV_GPU_UTIL{" + L + "}"], 50);
  // Per-process series never: an exited process must go stale at the next scrape.
  size_t procs = 0;
  for (const auto& [k, v] : m)
    if (k.rfind("gpuopt_process_sm_util{", 0) == 0) {
      ++procs;
      EXPECT_EQ(v, 33);
      EXPECT_EQ(ts.count(k), 0u) << k;
    }
  EXPECT_EQ(procs, 1u);
}

TEST(ExporterMetrics, EveryMetricNameIsValid) {
  for (const auto& d : gpu_metric_defs()) EXPECT_TRUE(prom_valid_metric_name(d.name)) << d.name;
}

}  // namespace
}  // namespace gpuopt::gpu
