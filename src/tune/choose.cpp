// The constraints, the Pareto front, the chosen point and the config.pbtxt it becomes.
#include "core/table.h"
#include "tune/search.h"
#include "tune/tune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace gpuopt::tune {
namespace {

std::string violations(const Point& p, const TuneOptions& o) {
  if (!p.ok) return p.oom ? "out of memory" : "failed";
  std::vector<std::string> v;
  if (o.latency_budget_ms > 0 && p.p99_ms > o.latency_budget_ms)
    v.push_back(fmt::format("p99 {:.2f} ms > {:.2f} ms", p.p99_ms, o.latency_budget_ms));
  if (o.memory_limit > 0 && p.memory_bytes > static_cast<int64_t>(o.memory_limit))
    v.push_back(fmt::format("memory {} > {}", format_bytes(static_cast<double>(p.memory_bytes)),
                            format_bytes(static_cast<double>(o.memory_limit))));
  if (o.min_throughput > 0 && p.throughput < o.min_throughput)
    v.push_back(fmt::format("{:.1f}/s < {:.1f}/s", p.throughput, o.min_throughput));
  return fmt::format("{}", fmt::join(v, "; "));
}

std::string describe(const Point& p) {
  if (p.mode == "online")
    return fmt::format("{} max_batch_size {}, {} instance{}, max_queue_delay {} us at concurrency {}", p.precision, p.batch,
                       p.instances, p.instances == 1 ? "" : "s", p.delay_us, p.concurrency);
  return fmt::format("{} batch {}", p.precision, p.batch);
}

}  // namespace

void choose(TuneResult* r) {
  const TuneOptions& o = r->options;
  bool online = false;
  for (Point& p : r->points) {
    p.violates = violations(p, o);
    p.pareto = false;
    online = online || (p.mode == "online" && p.ok);
  }
  // The front of feasible points per mode: none has both more throughput and a lower p99.
  for (Point& p : r->points) {
    if (!p.violates.empty()) continue;
    bool dominated = false;
    for (const Point& q : r->points) {
      if (&q == &p || !q.violates.empty() || q.mode != p.mode) continue;
      if (q.throughput >= p.throughput && q.p99_ms <= p.p99_ms && (q.throughput > p.throughput || q.p99_ms < p.p99_ms))
        dominated = true;
    }
    p.pareto = !dominated;
  }
  // The choice: served measurements when there are any (they include queueing and the network),
  // else the engine's; the most throughput, then the lowest p99, then the least memory.
  const std::string mode = online ? "online" : "offline";
  r->chosen = -1;
  int feasible = 0;
  for (size_t i = 0; i < r->points.size(); ++i) {
    const Point& p = r->points[i];
    if (p.mode != mode || !p.violates.empty()) continue;
    ++feasible;
    if (r->chosen < 0) {
      r->chosen = static_cast<int>(i);
      continue;
    }
    const Point& c = r->points[static_cast<size_t>(r->chosen)];
    if (std::tie(p.throughput, c.p99_ms, c.memory_bytes) > std::tie(c.throughput, p.p99_ms, p.memory_bytes))
      r->chosen = static_cast<int>(i);
  }
  std::vector<std::string> cons;
  if (o.latency_budget_ms > 0) cons.push_back(fmt::format("p99 <= {:.2f} ms", o.latency_budget_ms));
  if (o.memory_limit > 0) cons.push_back(fmt::format("memory <= {}", format_bytes(static_cast<double>(o.memory_limit))));
  if (o.min_throughput > 0) cons.push_back(fmt::format("throughput >= {:.1f}/s", o.min_throughput));
  const std::string within = cons.empty() ? "with no constraints" : fmt::format("within {}", fmt::join(cons, ", "));
  if (r->chosen < 0) {
    int ok = 0;
    for (const Point& p : r->points) ok += p.ok;
    r->why = fmt::format("no {} point meets the constraints ({} measured, {} ran): nothing chosen, no config written",
                         mode, r->points.size(), ok);
    return;
  }
  const Point& c = r->points[static_cast<size_t>(r->chosen)];
  r->why = fmt::format("{}: the most throughput ({:.1f} inferences/s, p99 {:.2f} ms) of {} feasible {} point{} {}", describe(c),
                       c.throughput, c.p99_ms, feasible, mode, feasible == 1 ? "" : "s", within);
  if (mode == "offline")
    r->why += "; offline mode measures the engine alone, so the config keeps 1 instance and a 100 us queue delay "
              "(--mode online measures those)";
}

std::string config_pbtxt(const TuneResult& r) {
  if (r.chosen < 0) return {};
  const Point& c = r.points[static_cast<size_t>(r.chosen)];
  const bool online = c.mode == "online";
  const int64_t delay = online ? c.delay_us : 100;
  const int instances = online ? c.instances : 1;
  std::vector<int64_t> preferred;
  if (c.batch >= 4) preferred.push_back(c.batch / 2);
  preferred.push_back(c.batch);
  std::string s;
  if (!r.why.empty()) s += fmt::format("# written by gpuopt tune: {}\n", r.why);
  s += fmt::format("name: \"{}\"\n", r.options.model_name);
  s += "platform: \"onnxruntime_onnx\"\n";
  s += fmt::format("max_batch_size: {}\n", c.batch);
  s += "dynamic_batching {\n";
  s += fmt::format("  preferred_batch_size: [ {} ]\n", fmt::join(preferred, ", "));
  s += fmt::format("  max_queue_delay_microseconds: {}\n", delay);
  s += "}\n";
  s += fmt::format("instance_group [\n  {{\n    count: {}\n    kind: {}\n  }}\n]\n", instances,
                   r.options.device.rfind("cuda", 0) != 0 ? "KIND_CPU" : "KIND_GPU");  // cpu or cpu-ref
  if (r.options.device.rfind("cuda", 0) == 0) s += "optimization {\n  cuda {\n    graphs: true\n  }\n}\n";
  // The precision the point ran at: int8 is the session's int8 on a Q/DQ model (search.h).
  s += fmt::format("parameters {{\n  key: \"gpuopt.precision\"\n  value {{\n    string_value: \"{}\"\n  }}\n}}\n",
                   session_precision(r.options.model, c.precision));
  for (const auto& [name, value] : r.options.kernels)
    s += fmt::format("parameters {{\n  key: \"gpuopt.kernel.{}\"\n  value {{\n    string_value: \"{}\"\n  }}\n}}\n",
                     name, value);
  return s;
}

}  // namespace gpuopt::tune
