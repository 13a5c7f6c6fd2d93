// Renders a Snapshot (plus the diagnosis findings) as Prometheus text with DCGM-exporter's
// metric names and labels (gpu, UUID, pci_bus_id, device, modelName, Hostname), so dashboards
// and alerts written for dcgm-exporter work unchanged. docs/monitoring.md lists every metric.
//
//   MetricsRenderer r({.hostname = "node1"});
//   std::string text = r.render(snapshot, findings);
#pragma once

#include "monitor/diagnosis.h"
#include "monitor/pod_index.h"
#include "monitor/prom_text.h"
#include "monitor/sampler_types.h"

#include <string>
#include <vector>

namespace gpuopt::gpu {

struct ExporterInfo {
  std::string hostname;
  std::string no_gpu_reason;  // non-empty: why there are no GPU series (no driver, no device)
  std::string driver_version, nvml_version, cuda_driver_version;
  double interval_s = 1;
};

// One metric a GPU sample may carry: name, help, type and how to read it (nullopt = n/a).
struct GpuMetricDef {
  const char* name;
  const char* help;
  PromType type;
  std::optional<double> (*get)(const GpuSample&);
  QueryGroup group;  // the query group that reads it (kCount: none, static device info)
};
const std::vector<GpuMetricDef>& gpu_metric_defs();

class MetricsRenderer {
 public:
  explicit MetricsRenderer(ExporterInfo info);
  // Whole /metrics body. Families are contiguous; a field that is n/a on a GPU is left out.
  std::string render(const Snapshot& s, const std::vector<Finding>& findings);
  const ExporterInfo& info() const { return info_; }
  void set_no_gpu_reason(std::string reason) { info_.no_gpu_reason = std::move(reason); }
  // Kubernetes attribution (`exporter --pod-resources-socket`): from the first call on, process
  // series carry pod/namespace/container labels from `index` and gpuopt_gpu_pod_info lists each
  // GPU's containers; `up` false (the last List failed) leaves the index empty.
  void set_pods(PodIndex index, bool up, uint64_t errors) {
    pods_enabled_ = true;
    pods_ = std::move(index);
    pods_up_ = up;
    pods_errors_ = errors;
  }

 private:
  const std::string& labels_for(const GpuSample& g);
  void render_query_stats(std::string* out, const Snapshot& s, const std::string& host_labels);
  void render_pod_info(std::string* out, const Snapshot& s);

  ExporterInfo info_;
  std::vector<std::pair<const DeviceInfo*, std::string>> labels_;  // pre-rendered per device
  size_t last_size_ = 4096;
  bool pods_enabled_ = false, pods_up_ = false;
  uint64_t pods_errors_ = 0;
  PodIndex pods_;
};

}  // namespace gpuopt::gpu
