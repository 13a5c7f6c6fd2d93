#include "monitor/exporter.h"

#include "core/log.h"
#include "net/http.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string_view>

namespace gpuopt::gpu {

namespace {

int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

Status parse_listen(const std::string& text, std::string* host, uint16_t* port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Status::InvalidArgument("--listen '{}': expected [ipv6]:port", text);
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return Status::InvalidArgument("--listen '{}': expected host:port", text);
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h.empty()) h = "0.0.0.0";
  char* end = nullptr;
  long v = p.empty() ? -1 : std::strtol(p.c_str(), &end, 10);
  if (v < 0 || v > 65535 || (end && *end)) return Status::InvalidArgument("--listen '{}': bad port '{}'", text, p);
  *host = h;
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

std::string keep_fields(const std::string& body, const std::vector<std::string>& fields) {
  std::string out;
  out.reserve(body.size());
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size() - 1;
    std::string_view line(body.data() + pos, end - pos + 1);
    std::string_view name = line;
    if (name.starts_with("# HELP ") || name.starts_with("# TYPE ")) name.remove_prefix(7);
    name = name.substr(0, name.find_first_of("{ \n"));
    if (!name.starts_with("DCGM_FI_") || std::find(fields.begin(), fields.end(), name) != fields.end())
      out.append(line);
    pos = end + 1;
  }
  return out;
}

Result<std::unique_ptr<Exporter>> Exporter::start(const ExporterOptions& options) {
  std::unique_ptr<Exporter> e(new Exporter());
  e->options_ = options;
  uint16_t port = 0;
  GPUOPT_RETURN_IF_ERROR(parse_listen(options.listen, &e->host_, &port));
  if (!(options.interval_s > 0)) return Status::InvalidArgument("--interval must be > 0");

  ExporterInfo info;
  info.hostname = hostname();
  info.interval_s = options.interval_s;
  SamplerOptions so = options.sampler;
  so.interval_s = options.interval_s;
  auto sampler = Sampler::create(so);
  if (sampler.ok()) {
    e->sampler_ = std::move(*sampler);
    info.driver_version = e->sampler_->driver().driver_version;
    info.nvml_version = e->sampler_->driver().nvml_version;
    info.cuda_driver_version = e->sampler_->driver().cuda_driver_version;
    if (e->sampler_->devices().empty()) e->no_gpu_reason_ = "NVML reports no devices";
  } else {
    // Still serve: the exporter's own metrics and the reason make the absence visible in Prometheus.
    e->no_gpu_reason_ = sampler.status().message();
  }
  info.no_gpu_reason = e->no_gpu_reason_;
  e->renderer_ = std::make_unique<MetricsRenderer>(info);
  e->diagnoser_ = std::make_unique<Diagnoser>(options.diagnosis);
  // The first sample before serving, so no scrape ever sees an exporter without GPU series.
  if (e->sampler_) e->on_sample(e->sampler_->sample());
  else e->set_body(std::make_shared<const std::string>(e->renderer_->render(Snapshot{}, {})));
  e->last_sample_steady_us_ = steady_us();

  net::Router router;
  Exporter* self = e.get();
  router.get("/metrics", [self](const net::HttpRequest&) {
    self->scrapes_.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<const std::string> body = self->metrics();
    return net::HttpResponse::text(200, *body, kPromContentType);
  });
  router.get("/health", [self](const net::HttpRequest&) {
    if (self->healthy()) return net::HttpResponse::text(200, "ok\n");
    return net::HttpResponse::text(503, "sampler stalled: no sample for more than 3 intervals\n");
  });
  router.get("/", [self](const net::HttpRequest&) {
    std::string body = "gpuopt exporter\n/metrics  Prometheus text (DCGM-compatible names)\n/health   liveness\n";
    if (!self->no_gpu_reason_.empty()) body += "no GPU series: " + self->no_gpu_reason_ + "\n";
    return net::HttpResponse::text(200, body);
  });
  net::ServerOptions so2;
  so2.host = e->host_;
  so2.port = port;
  so2.threads = options.threads;
  so2.max_body_bytes = 64 << 10;  // scrapes carry no body
  so2.server_name = "gpuopt-exporter";
  GPUOPT_ASSIGN_OR_RETURN(e->server_, net::HttpServer::start(so2, std::move(router)));
  if (e->sampler_) e->sampler_->start([self](const Snapshot& s) { self->on_sample(s); }, true);
  return e;
}

Exporter::~Exporter() { stop(); }

void Exporter::stop() {
  if (sampler_) sampler_->stop();
  if (server_) server_->stop(std::chrono::seconds(2));
}

uint16_t Exporter::port() const { return server_ ? server_->port() : 0; }

size_t Exporter::gpu_count() const { return sampler_ ? sampler_->devices().size() : 0; }

Exporter::QueryReport Exporter::query_report() const {
  std::lock_guard<std::mutex> lock(report_mu_);
  return report_;
}

void Exporter::on_sample(const Snapshot& s) {
  // Once per group: which query moved to the slow cadence, and why.
  for (size_t k = 0; k < kQueryGroupCount; ++k) {
    const QueryStat& q = s.queries[k];
    if (!q.moved || move_logged_[k]) continue;
    move_logged_[k] = true;
    GPUOPT_LOG(warn,
               "exporter: NVML query group '{}' ({}) costs {:.2f} ms per read (median of the last 5; mean {:.2f} ms "
               "over {} reads), over the {:.2f} ms budget: read every {} samples ({:g} s) from now on, last values "
               "exported in between",
               query_group_info(k).name, query_group_info(k).calls, 1e3 * q.moved_median_s,
               1e3 * q.wall_s / double(q.calls), q.calls, 1e3 * options_.sampler.slow_budget_s, s.slow_every,
               double(s.slow_every) * options_.interval_s);
  }
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    report_.queries = s.queries;
    report_.sample_seconds_total = s.sample_seconds_total;
    report_.samples = s.sequence;
    report_.slow_every = s.slow_every;
    report_.interval_s = options_.interval_s;
  }
  if (options_.pods) {
    Result<PodIndex> pods = options_.pods();
    if (!pods.ok()) ++pod_errors_;
    // Once per change: the labels go (or come back) with the kubelet's answer.
    if (pods.ok() != pods_up_) {
      if (pods.ok()) GPUOPT_LOG(info, "exporter: pod-resources answers again; pod labels restored");
      else GPUOPT_LOG(warn, "exporter: {}; per-process series carry no pod labels until it answers", pods.status().message());
    }
    pods_up_ = pods.ok();
    renderer_->set_pods(pods.ok() ? std::move(*pods) : PodIndex{}, pods_up_, pod_errors_);
  }
  diagnoser_->add(s);
  std::vector<Finding> findings = diagnoser_->findings();
  for (const Finding& f : findings)
    GPUOPT_LOG(debug, "GPU {} {} [{}]: {}", f.gpu, f.title, severity_name(f.severity), f.detail);
  set_body(std::make_shared<const std::string>(renderer_->render(s, findings)));
  last_sample_duration_s_.store(s.sample_duration_s);
  samples_.fetch_add(1, std::memory_order_relaxed);
  last_sample_steady_us_.store(steady_us());
}

bool Exporter::healthy() const {
  if (!sampler_) return true;  // nothing to sample: serving is all there is to check
  int64_t age = steady_us() - last_sample_steady_us_.load();
  return double(age) < 1e6 * (3 * options_.interval_s + 5);
}

}  // namespace gpuopt::gpu
