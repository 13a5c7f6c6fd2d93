#include "monitor/exporter_metrics.h"

#include "gpuopt/build_info.h"

#include <fmt/format.h>

#include <cstring>

namespace gpuopt::gpu {

namespace {

using O = std::optional<double>;
template <typename T>
O d(const std::optional<T>& v) {
  return v ? O(double(*v)) : std::nullopt;
}
O mib(const std::optional<uint64_t>& v) { return v ? O(double(*v / (1024ull * 1024ull))) : std::nullopt; }

// A series read on the slow cadence carries the time it was read (ms), so Prometheus stores the
// value at its real time instead of each scrape's; series read every sample carry none.
int64_t read_ms(const Snapshot& s, const GpuSample& g, QueryGroup q) {
  size_t k = size_t(q);
  if (k >= kQueryGroupCount || !s.queries[k].slow || g.read_us[k] <= 0) return 0;
  return g.read_us[k] / 1000;
}

}  // namespace

const std::vector<GpuMetricDef>& gpu_metric_defs() {
  // Names, units and help follow dcgm-exporter's default counters (DCGM field names).
  static const std::vector<GpuMetricDef> kDefs = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", PromType::kGauge, [](const GpuSample& g) { return d(g.gpu_util_pct); }, QueryGroup::kUtilization},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", PromType::kGauge, [](const GpuSample& g) { return d(g.mem_util_pct); }, QueryGroup::kUtilization},
      {"DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).", PromType::kGauge, [](const GpuSample& g) { return mib(g.mem_total_bytes); }, QueryGroup::kMemory},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", PromType::kGauge, [](const GpuSample& g) { return mib(g.mem_used_bytes); }, QueryGroup::kMemory},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", PromType::kGauge, [](const GpuSample& g) { return mib(g.mem_free_bytes); }, QueryGroup::kMemory},
      {"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", PromType::kGauge, [](const GpuSample& g) { return mib(g.mem_reserved_bytes); }, QueryGroup::kMemory},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", PromType::kGauge, [](const GpuSample& g) { return d(g.temp_gpu_c); }, QueryGroup::kTemperature},
      {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", PromType::kGauge, [](const GpuSample& g) { return d(g.temp_mem_c); }, QueryGroup::kMemoryTemperature},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", PromType::kGauge, [](const GpuSample& g) { return g.power_w; }, QueryGroup::kPower},
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", PromType::kGauge, [](const GpuSample& g) { return g.power_limit_w; }, QueryGroup::kPowerLimit},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", PromType::kCounter, [](const GpuSample& g) { return d(g.energy_mj); }, QueryGroup::kEnergy},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", PromType::kGauge, [](const GpuSample& g) { return d(g.sm_clock_mhz); }, QueryGroup::kClocks},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", PromType::kGauge, [](const GpuSample& g) { return d(g.mem_clock_mhz); }, QueryGroup::kClocks},
      {"DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock frequency (in MHz).", PromType::kGauge, [](const GpuSample& g) { return g.info ? d(g.info->sm_clock_max_mhz) : O(); }, QueryGroup::kCount},
      {"DCGM_FI_DEV_MAX_MEM_CLOCK", "Maximum memory clock frequency (in MHz).", PromType::kGauge, [](const GpuSample& g) { return g.info ? d(g.info->mem_clock_max_mhz) : O(); }, QueryGroup::kCount},
      {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "PCIe TX throughput (in KB/s).", PromType::kGauge, [](const GpuSample& g) { return d(g.pcie_tx_kbps); }, QueryGroup::kPcieThroughput},
      {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "PCIe RX throughput (in KB/s).", PromType::kGauge, [](const GpuSample& g) { return d(g.pcie_rx_kbps); }, QueryGroup::kPcieThroughput},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", PromType::kCounter, [](const GpuSample& g) { return d(g.pcie_replay_count); }, QueryGroup::kPcieReplay},
      {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event (throttle) reasons (bitmask of nvmlClocksEventReason).", PromType::kGauge, [](const GpuSample& g) { return d(g.clock_event_reasons); }, QueryGroup::kClockEventReasons},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", PromType::kCounter, [](const GpuSample& g) { return d(g.ecc_corrected_volatile); }, QueryGroup::kEcc},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", PromType::kCounter, [](const GpuSample& g) { return d(g.ecc_uncorrected_volatile); }, QueryGroup::kEcc},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.", PromType::kCounter, [](const GpuSample& g) { return d(g.ecc_corrected_aggregate); }, QueryGroup::kEcc},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.", PromType::kCounter, [](const GpuSample& g) { return d(g.ecc_uncorrected_aggregate); }, QueryGroup::kEcc},
      {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", PromType::kGauge, [](const GpuSample& g) { return d(g.last_xid); }, QueryGroup::kXidEvents},
      {"DCGM_FI_DEV_MIG_MODE", "MIG mode (1 enabled, 0 disabled).", PromType::kGauge, [](const GpuSample& g) { return g.mig_enabled ? O(*g.mig_enabled ? 1 : 0) : O(); }, QueryGroup::kMig},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.graphics_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.sm_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM to the maximum (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.sm_occupancy; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles any tensor pipe is active (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.tensor_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.dram_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.fp64_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.fp32_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active (GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.fp16_active; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus (in bytes per second, GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.pcie_tx_bytes_per_s; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus (in bytes per second, GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.pcie_rx_bytes_per_s; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_NVLINK_TX_BYTES", "The rate of data transmitted over NVLink (in bytes per second, GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.nvlink_tx_bytes_per_s; }, QueryGroup::kGpm},
      {"DCGM_FI_PROF_NVLINK_RX_BYTES", "The rate of data received over NVLink (in bytes per second, GPM).", PromType::kGauge, [](const GpuSample& g) { return g.gpm.nvlink_rx_bytes_per_s; }, QueryGroup::kGpm},
      {"gpuopt_gpu_lost", "1 when the device stopped answering NVML (fell off the bus, driver reset).", PromType::kGauge, [](const GpuSample& g) { return O(g.lost ? 1 : 0); }, QueryGroup::kCount},
      {"gpuopt_gpu_processes", "Processes using the GPU.", PromType::kGauge, [](const GpuSample& g) { return g.processes_available ? O(double(g.processes.size())) : O(); }, QueryGroup::kProcessList},
      {"gpuopt_xid_events_total", "XID events seen since the exporter started.", PromType::kCounter, [](const GpuSample& g) { return d(g.xid_count); }, QueryGroup::kXidEvents},
  };
  return kDefs;
}

// The sampler's own cost per NVML query group, in the style of exporters' self-telemetry
// (process_cpu_seconds_total, ..._duration_seconds): counters a dashboard turns into rates.
void MetricsRenderer::render_query_stats(std::string* out, const Snapshot& s, const std::string& host_labels) {
  prom_family(out, "gpuopt_exporter_sample_seconds_total", "Time spent taking samples since the exporter started.",
              PromType::kCounter);
  prom_sample(out, "gpuopt_exporter_sample_seconds_total", host_labels, s.sample_seconds_total);
  struct Family {
    const char* name;
    const char* help;
    PromType type;
    double (*get)(const QueryStat&, double slow_interval_s, double interval_s);
  };
  static const Family kFamilies[] = {
      {"gpuopt_exporter_nvml_query_calls_total", "Reads of the NVML query group (one per GPU per read).",
       PromType::kCounter, [](const QueryStat& q, double, double) { return double(q.calls); }},
      {"gpuopt_exporter_nvml_query_seconds_total", "Wall time spent in the query group's calls (steady clock).",
       PromType::kCounter, [](const QueryStat& q, double, double) { return q.wall_s; }},
      {"gpuopt_exporter_nvml_query_cpu_seconds_total", "CPU time of the sampling thread in the query group's calls.",
       PromType::kCounter, [](const QueryStat& q, double, double) { return q.cpu_s; }},
      {"gpuopt_exporter_nvml_query_interval_seconds",
       "How often the query group is read: the sampling interval, or the slow interval on the slow cadence.",
       PromType::kGauge, [](const QueryStat& q, double slow, double every) { return q.slow ? slow : every; }},
      {"gpuopt_exporter_nvml_query_moved", "1 when the query group moved to the slow cadence at run time (cost over budget).",
       PromType::kGauge, [](const QueryStat& q, double, double) { return q.moved ? 1.0 : 0.0; }},
  };
  const double slow_interval = info_.interval_s * double(s.slow_every);
  for (const Family& f : kFamilies) {
    prom_family(out, f.name, f.help, f.type);
    for (size_t k = 0; k < kQueryGroupCount; ++k)
      if (s.queries[k].calls > 0)
        prom_sample(out, f.name, host_labels, "query", query_group_info(k).name,
                    f.get(s.queries[k], slow_interval, info_.interval_s));
  }
}

// One series per (GPU, container holding it): joins any per-GPU series to its pods.
void MetricsRenderer::render_pod_info(std::string* out, const Snapshot& s) {
  prom_family(out, "gpuopt_gpu_pod_info",
              "A Kubernetes container the GPU is allocated to, from the kubelet's pod-resources API (value 1).",
              PromType::kGauge);
  std::string l;
  for (const GpuSample& g : s.gpus) {
    const std::vector<PodRef>* refs = g.info ? pods_.find(g.info->uuid) : nullptr;
    if (!refs) continue;
    for (const PodRef& r : *refs) {
      l.assign(labels_for(g));
      prom_label(&l, "pod", r.pod);
      prom_label(&l, "namespace", r.namespace_name);
      prom_label(&l, "container", r.container);
      prom_label(&l, "resource", r.resource);
      prom_sample(out, "gpuopt_gpu_pod_info", l, 1);
    }
  }
}

MetricsRenderer::MetricsRenderer(ExporterInfo info) : info_(std::move(info)) {}

const std::string& MetricsRenderer::labels_for(const GpuSample& g) {
  for (const auto& [info, labels] : labels_)
    if (info == g.info) return labels;
  std::string l;
  const DeviceInfo empty;
  const DeviceInfo& i = g.info ? *g.info : empty;
  prom_label(&l, "gpu", std::to_string(i.index));
  prom_label(&l, "UUID", i.uuid);
  prom_label(&l, "pci_bus_id", i.pci_bus_id);
  prom_label(&l, "device", i.device);
  prom_label(&l, "modelName", i.name);
  prom_label(&l, "Hostname", info_.hostname);
  labels_.emplace_back(g.info, std::move(l));
  return labels_.back().second;
}

// The program name of a command line: basename of its first word.
static std::string_view process_name(const char* command) {
  std::string_view c(command);
  c = c.substr(0, c.find(' '));
  size_t slash = c.rfind('/');
  return slash == std::string_view::npos ? c : c.substr(slash + 1);
}

std::string MetricsRenderer::render(const Snapshot& s, const std::vector<Finding>& findings) {
  std::string out;
  out.reserve(last_size_ + last_size_ / 4);
  std::string l;

  prom_family(&out, "gpuopt_build_info", "gpuopt version and build (value 1).", PromType::kGauge);
  prom_label(&l, "version", GPUOPT_VERSION_STRING);
  prom_label(&l, "git_hash", GPUOPT_GIT_HASH);
  prom_label(&l, "cuda_toolkit", GPUOPT_CUDA_TOOLKIT_VERSION);
  prom_label(&l, "Hostname", info_.hostname);
  prom_sample(&out, "gpuopt_build_info", l, 1);
  if (!info_.driver_version.empty()) {
    l.clear();
    prom_label(&l, "driver_version", info_.driver_version);
    prom_label(&l, "nvml_version", info_.nvml_version);
    prom_label(&l, "cuda_driver_version", info_.cuda_driver_version);
    prom_label(&l, "Hostname", info_.hostname);
    prom_family(&out, "gpuopt_driver_info", "NVIDIA driver seen by the exporter (value 1).", PromType::kGauge);
    prom_sample(&out, "gpuopt_driver_info", l, 1);
  }
  l.clear();
  prom_label(&l, "Hostname", info_.hostname);
  prom_family(&out, "gpuopt_exporter_gpus", "GPUs the exporter samples.", PromType::kGauge);
  prom_sample(&out, "gpuopt_exporter_gpus", l, double(s.gpus.size()));
  if (!info_.no_gpu_reason.empty() || s.gpus.empty()) {
    std::string reason = info_.no_gpu_reason.empty() ? "NVML reports no devices" : info_.no_gpu_reason;
    prom_comment(&out, "no GPU series: " + reason);
    prom_family(&out, "gpuopt_exporter_no_gpu", "Why there are no GPU series (value 1, reason in the label).",
                PromType::kGauge);
    prom_sample(&out, "gpuopt_exporter_no_gpu", l, "reason", reason, 1);
  }
  prom_family(&out, "gpuopt_exporter_samples_total", "Samples taken since the exporter started.", PromType::kCounter);
  prom_sample(&out, "gpuopt_exporter_samples_total", l, double(s.sequence));
  prom_family(&out, "gpuopt_exporter_sample_duration_seconds", "Time the last sample's NVML queries took.",
              PromType::kGauge);
  prom_sample(&out, "gpuopt_exporter_sample_duration_seconds", l, s.sample_duration_s);
  prom_family(&out, "gpuopt_exporter_last_sample_timestamp_seconds", "Wall-clock time of the last sample.",
              PromType::kGauge);
  prom_sample(&out, "gpuopt_exporter_last_sample_timestamp_seconds", l, double(s.timestamp_us) / 1e6);
  prom_family(&out, "gpuopt_exporter_interval_seconds", "Sampling interval.", PromType::kGauge);
  prom_sample(&out, "gpuopt_exporter_interval_seconds", l, info_.interval_s);
  if (pods_enabled_) {
    prom_family(&out, "gpuopt_exporter_pod_resources_up",
                "1 when the last List call to the kubelet's pod-resources socket succeeded.", PromType::kGauge);
    prom_sample(&out, "gpuopt_exporter_pod_resources_up", l, pods_up_ ? 1 : 0);
    prom_family(&out, "gpuopt_exporter_pod_resources_errors_total",
                "Failed List calls to the kubelet's pod-resources socket.", PromType::kCounter);
    prom_sample(&out, "gpuopt_exporter_pod_resources_errors_total", l, double(pods_errors_));
  }

  if (s.gpus.empty()) {
    last_size_ = out.size();
    return out;
  }
  render_query_stats(&out, s, l);

  for (const GpuMetricDef& m : gpu_metric_defs()) {
    bool header = false;
    for (const GpuSample& g : s.gpus) {
      std::optional<double> v = g.lost && std::strcmp(m.name, "gpuopt_gpu_lost") != 0 ? std::nullopt : m.get(g);
      if (!v) continue;
      if (!header) prom_family(&out, m.name, m.help, m.type), header = true;
      prom_sample(&out, m.name, labels_for(g), *v, read_ms(s, g, m.group));
    }
  }

  // Clock-event reasons: whether each is active now, and seconds spent with it active.
  prom_family(&out, "gpuopt_clock_event_reason_active", "1 while the clock-event reason holds clocks down.",
              PromType::kGauge);
  for (const GpuSample& g : s.gpus) {
    if (!g.clock_event_reasons) continue;
    for (const auto& r : kClockEventReasons)
      prom_sample(&out, "gpuopt_clock_event_reason_active", labels_for(g), "reason", r.name,
                  (*g.clock_event_reasons & r.bit) ? 1 : 0, read_ms(s, g, QueryGroup::kClockEventReasons));
  }
  prom_family(&out, "gpuopt_clock_event_reason_seconds_total",
              "Seconds the clock-event reason was active since the exporter started (whole sample intervals).",
              PromType::kCounter);
  for (const GpuSample& g : s.gpus) {
    if (!g.clock_event_reasons) continue;
    for (size_t k = 0; k < kClockEventReasons.size(); ++k)
      prom_sample(&out, "gpuopt_clock_event_reason_seconds_total", labels_for(g), "reason",
                  kClockEventReasons[k].name, g.clock_event_seconds[k], read_ms(s, g, QueryGroup::kClockEventReasons));
  }

  // Per process: memory (and SM utilisation where the driver gives it). No sample timestamps
  // even on the slow cadence: Prometheus writes no staleness marker for timestamped series, so
  // an exited process would linger for 5 minutes; without one it disappears at the next scrape.
  prom_family(&out, "gpuopt_process_gpu_memory_bytes", "GPU memory used by a process (in bytes).", PromType::kGauge);
  std::string pl;
  auto proc_labels = [&](const GpuSample& g, const ProcessSample& p) {
    pl.assign(labels_for(g));
    prom_label(&pl, "pid", std::to_string(p.pid));
    prom_label(&pl, "process_name", process_name(p.command));
    prom_label(&pl, "user", p.user);
    prom_label(&pl, "container_id", p.container_id);
    if (pods_enabled_) {
      // The container holding this GPU, when exactly one does; a GPU shared by several
      // (time-slicing) leaves the process unattributed: pod-resources names no process.
      const std::vector<PodRef>* refs = g.info ? pods_.find(g.info->uuid) : nullptr;
      const PodRef* ref = refs && refs->size() == 1 ? &refs->front() : nullptr;
      prom_label(&pl, "pod", ref ? ref->pod : "");
      prom_label(&pl, "namespace", ref ? ref->namespace_name : "");
      prom_label(&pl, "container", ref ? ref->container : "");
    }
    return std::string_view(pl);
  };
  for (const GpuSample& g : s.gpus)
    for (const ProcessSample& p : g.processes)
      if (p.gpu_memory_bytes)
        prom_sample(&out, "gpuopt_process_gpu_memory_bytes", proc_labels(g, p), double(*p.gpu_memory_bytes));
  prom_family(&out, "gpuopt_process_sm_util", "SM utilization of a process over the last interval (in %).",
              PromType::kGauge);
  for (const GpuSample& g : s.gpus)
    for (const ProcessSample& p : g.processes)
      if (p.sm_util_pct) prom_sample(&out, "gpuopt_process_sm_util", proc_labels(g, p), double(*p.sm_util_pct));

  if (pods_enabled_) render_pod_info(&out, s);

  // Diagnosis: one series per GPU and rule; 0 = not firing, else 1 info, 2 warning, 3 critical.
  prom_family(&out, "gpuopt_diagnosis",
              "Bottleneck diagnosis per rule: 0 not firing, 1 info, 2 warning, 3 critical (docs/monitoring.md).",
              PromType::kGauge);
  for (const GpuSample& g : s.gpus) {
    unsigned index = g.info ? g.info->index : 0;
    for (size_t r = 0; r < kRuleCount; ++r) {
      double v = 0;
      for (const Finding& f : findings)
        if (f.gpu == index && size_t(f.rule) == r) v = std::max(v, double(int(f.severity) + 1));
      prom_sample(&out, "gpuopt_diagnosis", labels_for(g), "rule", rule_name(Rule(r)), v);
    }
  }
  last_size_ = out.size();
  return out;
}

}  // namespace gpuopt::gpu
