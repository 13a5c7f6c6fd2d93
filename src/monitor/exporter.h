// `gpuopt exporter`: samples the GPUs at an interval and serves the last sample as Prometheus
// text at /metrics (pre-rendered after each sample and swapped in atomically, so a scrape only
// copies a string), /health for liveness. Without a GPU it still serves its own metrics and
// says why there are no GPU series.
//
//   ExporterOptions o;
//   o.listen = "127.0.0.1:0";
//   GPUOPT_ASSIGN_OR_RETURN(auto e, Exporter::start(o));
//   // curl http://127.0.0.1:<e->port()>/metrics
//   e->stop();
#pragma once

#include "core/status.h"
#include "monitor/diagnosis.h"
#include "monitor/exporter_metrics.h"
#include "monitor/sampler.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace gpuopt::net {
class HttpServer;
}

namespace gpuopt::gpu {

struct ExporterOptions {
  std::string listen = "0.0.0.0:9400";  // host:port, [v6]:port or :port
  double interval_s = 1.0;
  int threads = 2;                      // HTTP threads (scrapes are cheap; two cover a slow client)
  SamplerOptions sampler;               // interval_s is taken from above
  DiagnosisConfig diagnosis;
  // Set: called once per sample for the containers each GPU is allocated to (the kubelet's
  // pod-resources API, src/kube/); their pod/namespace/container label per-process series.
  PodLookup pods;
  // Non-empty: only these DCGM_FI_* series are exported (dcgm-exporter's --collectors file);
  // the gpuopt_* series are always there.
  std::vector<std::string> fields;
};

// The Prometheus text `body` without the DCGM_FI_* families that are not in `fields`.
std::string keep_fields(const std::string& body, const std::vector<std::string>& fields);

// "0.0.0.0:9400" -> host, port; "[::1]:9400", ":9400" (all interfaces). InvalidArgument otherwise.
Status parse_listen(const std::string& text, std::string* host, uint16_t* port);

class Exporter {
 public:
  static Result<std::unique_ptr<Exporter>> start(const ExporterOptions& options);
  ~Exporter();
  void stop();

  uint16_t port() const;
  const std::string& host() const { return host_; }
  // The body /metrics serves now.
  std::shared_ptr<const std::string> metrics() const {
    std::lock_guard<std::mutex> lock(body_mu_);
    return body_;
  }
  // Empty when GPUs are sampled; the reason otherwise.
  const std::string& no_gpu_reason() const { return no_gpu_reason_; }
  size_t gpu_count() const;
  uint64_t samples() const { return samples_.load(); }
  uint64_t scrapes() const { return scrapes_.load(); }
  double last_sample_duration_s() const { return last_sample_duration_s_.load(); }
  // The sampler's cost per query group so far (empty queries when no GPU is sampled).
  struct QueryReport {
    std::array<QueryStat, kQueryGroupCount> queries{};
    double sample_seconds_total = 0;
    uint64_t samples = 0, slow_every = 1;
    double interval_s = 0;
  };
  QueryReport query_report() const;

 private:
  Exporter() = default;
  void on_sample(const Snapshot& s);
  bool healthy() const;

  ExporterOptions options_;
  std::string host_;
  std::string no_gpu_reason_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Diagnoser> diagnoser_;
  std::unique_ptr<MetricsRenderer> renderer_;
  // Swapped by the sampler thread, read by scrapes. A mutex, not std::atomic<shared_ptr>: GCC 12's
  // atomic<shared_ptr> load unlocks with a relaxed store, so TSan reports the swap as a race.
  mutable std::mutex body_mu_;
  std::shared_ptr<const std::string> body_;
  void set_body(std::shared_ptr<const std::string> b) {
    if (!options_.fields.empty()) b = std::make_shared<const std::string>(keep_fields(*b, options_.fields));
    std::lock_guard<std::mutex> lock(body_mu_);
    body_.swap(b);  // the old body is freed outside the lock, when `b` goes
  }
  std::atomic<int64_t> last_sample_steady_us_{0};
  std::atomic<uint64_t> samples_{0}, scrapes_{0};
  std::atomic<double> last_sample_duration_s_{0};
  mutable std::mutex report_mu_;
  QueryReport report_;                          // guarded by report_mu_
  std::array<bool, kQueryGroupCount> move_logged_{};  // sampler thread only
  uint64_t pod_errors_ = 0;                            // sampler thread only
  bool pods_up_ = true;                                // sampler thread only
  std::unique_ptr<net::HttpServer> server_;
};

}  // namespace gpuopt::gpu
