// /metrics: Triton's metric names and labels, gpuopt's histograms, NVML GPU metrics.
#include "monitor/nvml.h"
#include "monitor/prom_text.h"
#include "server/inference_server.h"
#include "server/openai/llm_models.h"
#include "server/request_body.h"

namespace gpuopt::server {

using gpu::prom_family;
using gpu::prom_label;
using gpu::prom_sample;
using gpu::PromType;

namespace {

void histogram(std::string* out, const std::string& name, const std::string& labels, const Histogram& h) {
  uint64_t cum = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cum += h.counts[i];
    std::string le = i < h.bounds.size() ? fmt::format("{}", h.bounds[i]) : "+Inf";
    prom_sample(out, name + "_bucket", labels, "le", le, static_cast<double>(cum));
  }
  prom_sample(out, name + "_sum", labels, h.sum);
  prom_sample(out, name + "_count", labels, static_cast<double>(h.count));
}

}  // namespace

std::string InferenceServer::metrics_text() const {
  struct Row {
    std::string labels;
    StatsSnapshot s;
    int64_t pending;
    std::vector<InstanceCounters> instances;
    int max_concurrent = 0;
    uint64_t staged = 0, filled = 0;
  };
  std::vector<Row> rows;
  for (auto& v : repo_->ready_versions()) {
    Row r;
    prom_label(&r.labels, "model", v->name);
    prom_label(&r.labels, "version", v->version_str);
    r.s = v->stats->snapshot();
    r.pending = v->stats->pending.load();
    r.instances = v->batcher->instance_counters();
    r.max_concurrent = v->batcher->max_concurrent();
    r.staged = v->batcher->staged_batches();
    r.filled = v->batcher->filled_batches();
    rows.push_back(std::move(r));
  }
  std::string out;
  out.reserve(8192);
  auto counter = [&](const char* name, const char* help, auto get) {
    prom_family(&out, name, help, PromType::kCounter);
    for (const Row& r : rows) prom_sample(&out, name, r.labels, static_cast<double>(get(r.s)));
  };
  counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes",
          [](const StatsSnapshot& s) { return s.success.count; });
  prom_family(&out, "nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
              PromType::kCounter);
  for (const Row& r : rows)
    for (int i = 0; i < 4; ++i)
      prom_sample(&out, "nv_inference_request_failure", r.labels, "reason",
                  fail_reason_name(static_cast<FailReason>(i)),
                  static_cast<double>(r.s.failures[static_cast<size_t>(i)]));
  counter("nv_inference_count", "Number of inferences performed (does not include cached requests)",
          [](const StatsSnapshot& s) { return s.inference_count; });
  counter("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
          [](const StatsSnapshot& s) { return s.execution_count; });
  prom_family(&out, "nv_inference_pending_request_count",
              "Instantaneous number of pending requests awaiting execution per-model.", PromType::kGauge);
  for (const Row& r : rows)
    prom_sample(&out, "nv_inference_pending_request_count", r.labels, static_cast<double>(r.pending));
  counter("nv_inference_request_duration_us",
          "Cumulative inference request duration in microseconds (includes cached requests)",
          [](const StatsSnapshot& s) { return (s.success.ns + s.fail.ns) / 1000; });
  counter("nv_inference_queue_duration_us",
          "Cumulative inference queuing duration in microseconds (includes cached requests)",
          [](const StatsSnapshot& s) { return s.queue.ns / 1000; });
  counter("nv_inference_compute_input_duration_us",
          "Cumulative compute input duration in microseconds (does not include cached requests)",
          [](const StatsSnapshot& s) { return s.compute_input.ns / 1000; });
  counter("nv_inference_compute_infer_duration_us",
          "Cumulative compute inference duration in microseconds (does not include cached requests)",
          [](const StatsSnapshot& s) { return s.compute_infer.ns / 1000; });
  counter("nv_inference_compute_output_duration_us",
          "Cumulative inference compute output duration in microseconds (does not include cached requests)",
          [](const StatsSnapshot& s) { return s.compute_output.ns / 1000; });

  // The instances (gpuopt's): who ran what, and whether they ran at the same time.
  auto per_instance = [&](const char* name, const char* help, auto get) {
    prom_family(&out, name, help, PromType::kCounter);
    for (const Row& r : rows)
      for (const InstanceCounters& c : r.instances)
        prom_sample(&out, name, r.labels, "instance", c.name, static_cast<double>(get(c)));
  };
  per_instance("gpuopt_instance_execution_count", "Model executions (batches) run by each instance",
               [](const InstanceCounters& c) { return c.executions; });
  per_instance("gpuopt_instance_inference_count", "Batch rows run by each instance (padding excluded)",
               [](const InstanceCounters& c) { return c.rows; });
  per_instance("gpuopt_instance_busy_us", "Time each instance spent executing batches, microseconds",
               [](const InstanceCounters& c) { return c.busy_ns / 1000; });
  prom_family(&out, "gpuopt_instance_concurrency_max", "Most instances of the model seen executing at the same time",
              PromType::kGauge);
  for (const Row& r : rows)
    prom_sample(&out, "gpuopt_instance_concurrency_max", r.labels, static_cast<double>(r.max_concurrent));
  prom_family(&out, "gpuopt_batches_staged_ahead",
              "Batches formed and staged while every instance was busy (taken by the first one free)",
              PromType::kCounter);
  for (const Row& r : rows) prom_sample(&out, "gpuopt_batches_staged_ahead", r.labels, static_cast<double>(r.staged));
  prom_family(&out, "gpuopt_batches_filled",
              "Batches held back to fill with more requests under load (the batcher's own wait, no queue delay configured)",
              PromType::kCounter);
  for (const Row& r : rows) prom_sample(&out, "gpuopt_batches_filled", r.labels, static_cast<double>(r.filled));

  // The pinned host memory pool (request bodies and batches of GPU models, request_body.h).
  const BodyPool::Stats pool = pinned_pool()->stats();
  auto pool_metric = [&](const char* name, const char* help, PromType type, double v) {
    prom_family(&out, name, help, type);
    prom_sample(&out, name, "", v);
  };
  pool_metric("gpuopt_pinned_memory_pool_capacity_bytes", "Most page-locked host memory the pool may allocate",
              PromType::kGauge, static_cast<double>(pool.capacity));
  pool_metric("gpuopt_pinned_memory_pool_allocated_bytes", "Page-locked host memory the pool holds (in use and free)",
              PromType::kGauge, static_cast<double>(pool.allocated));
  pool_metric("gpuopt_pinned_memory_pool_used_bytes", "Page-locked host memory in use by requests and batches",
              PromType::kGauge, static_cast<double>(pool.in_use));
  pool_metric("gpuopt_pinned_memory_pool_allocations_total", "Page-locked blocks allocated (cudaHostAlloc)",
              PromType::kCounter, static_cast<double>(pool.allocs));
  pool_metric("gpuopt_pinned_memory_pool_frees_total", "Free blocks given back to make room for another size",
              PromType::kCounter, static_cast<double>(pool.frees));
  pool_metric("gpuopt_pinned_memory_pool_fallbacks_total",
              "Requests and batches placed in ordinary memory: the pool's capacity was in use",
              PromType::kCounter, static_cast<double>(pool.fallbacks));

  // Histograms (gpuopt's, beyond Triton): Prometheus type histogram, cumulative buckets.
  auto hist = [&](const char* name, const char* help, Histogram StatsSnapshot::*h) {
    out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    for (const Row& r : rows) histogram(&out, name, r.labels, r.s.*h);
  };
  hist("gpuopt_inference_request_duration_us", "End-to-end request time in the server, microseconds",
       &StatsSnapshot::request_us);
  hist("gpuopt_inference_queue_duration_us", "Time requests waited in the batcher queue, microseconds",
       &StatsSnapshot::queue_us);
  hist("gpuopt_inference_compute_duration_us", "Time per model execution (input + infer + output), microseconds",
       &StatsSnapshot::compute_us);
  hist("gpuopt_inference_batch_size", "Batch size (rows) of each model execution", &StatsSnapshot::batch_size);

  if (nvml_) {
    auto count = nvml_->device_count();
    if (count.ok() && *count > 0) {
      struct G {
        std::string labels;
        std::optional<double> util, used, total, power, energy;
      };
      std::vector<G> gs;
      for (unsigned i = 0; i < *count; ++i) {
        auto d = nvml_->device(i);
        if (!d.ok()) continue;
        G g;
        auto uuid = nvml_->uuid(*d);
        prom_label(&g.labels, "gpu_uuid", uuid.ok() ? *uuid : std::to_string(i));
        if (auto u = nvml_->utilization(*d); u.ok()) g.util = u->gpu / 100.0;
        if (auto m = nvml_->memory_info(*d); m.ok()) {
          g.used = static_cast<double>(m->used);
          g.total = static_cast<double>(m->total);
        }
        if (auto p = nvml_->power_usage_mw(*d); p.ok()) g.power = *p / 1000.0;
        if (auto e = nvml_->total_energy_mj(*d); e.ok()) g.energy = static_cast<double>(*e) / 1000.0;
        gs.push_back(std::move(g));
      }
      auto gauge = [&](const char* name, const char* help, PromType type, std::optional<double> G::*f) {
        prom_family(&out, name, help, type);
        for (const G& g : gs)
          if (g.*f) prom_sample(&out, name, g.labels, *(g.*f));
      };
      gauge("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", PromType::kGauge, &G::util);
      gauge("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", PromType::kGauge, &G::total);
      gauge("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", PromType::kGauge, &G::used);
      gauge("nv_gpu_power_usage", "GPU power usage in watts", PromType::kGauge, &G::power);
      gauge("nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started",
            PromType::kCounter, &G::energy);
    }
  }
  if (llm_) out += llm_->metrics_text();
  return out;
}

}  // namespace gpuopt::server
