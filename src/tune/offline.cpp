// The offline search (tune.h): per precision, batches in powers of two, then a binary search
// at the memory edge; each point measured on the engine alone.
#include "core/device.h"
#include "tune/search.h"

#include "ir/graph.h"
#include "onnx/importer.h"
#include "profile/inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

namespace gpuopt::tune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace

ModelKinds model_kinds(const std::string& model) {
  // Asked per precision and per session load: the model is read once per path.
  static std::mutex mu;
  static std::map<std::string, ModelKinds> seen;
  std::lock_guard<std::mutex> lk(mu);
  if (auto it = seen.find(model); it != seen.end()) return it->second;
  ModelKinds k;
  auto g = load_onnx_model(model);
  if (!g.ok()) {
    k.error = g.status().message();
  } else {
    for (const Node& n : g->nodes()) {
      const std::string& t = n.op_type;
      k.qdq |= t == "QuantizeLinear" || t == "DequantizeLinear";
      k.quantized_ops |= t.rfind("QLinear", 0) == 0 || (t.size() > 7 && t.compare(t.size() - 7, 7, "Integer") == 0);
      k.fp8 |= t == "Fp8Gemm";
    }
  }
  return seen[model] = k;
}

std::string session_precision(const std::string& model, const std::string& precision) {
  // int8 on a Q/DQ model is the session's int8 (its Q/DQ pairs fused into int8 kernels on the GPU);
  // a model of QLinear*/*Integer nodes only carries its int8 in those nodes, the rest at fp32.
  if (precision == "int8") return model_kinds(model).qdq ? "int8" : "fp32";
  return precision;
}

std::string precision_unavailable(const TuneOptions& o, const std::string& precision) {
  if (precision != "int8" && precision != "fp8") return {};
  const ModelKinds k = model_kinds(o.model);
  if (!k.error.empty()) return k.error;
  if (precision == "fp8")
    return k.fp8 ? std::string() : "the model has no Fp8Gemm nodes (fp8 serving runs a model that carries them)";
  if (k.qdq || k.quantized_ops) return {};
  return "the model has no quantized nodes (QuantizeLinear/DequantizeLinear, QLinear*, *Integer): quantize it first "
         "and tune the quantized model";
}

Result<std::unique_ptr<Session>> load_session(const TuneOptions& o, const std::string& precision) {
  SessionOptions so;
  GPUOPT_ASSIGN_OR_RETURN(so.device, parse_device(o.device));
  so.precision = session_precision(o.model, precision);
  so.memory_limit = o.memory_limit;
  if (!o.kernels.empty()) {
    GPUOPT_ASSIGN_OR_RETURN(so.kernels, KernelSettings::from_env());
    for (const auto& [name, value] : o.kernels) GPUOPT_RETURN_IF_ERROR(so.kernels->set(name, value));
  }
  return Session::load(o.model, so);
}

Point measure_offline(Session& s, const TuneOptions& o, const std::string& precision, int64_t batch, GpuUtil* util) {
  Point p;
  p.mode = "offline";
  p.precision = precision;
  p.batch = batch;
  const auto t0 = Clock::now();
  auto feeds = profile::random_feeds(s, batch, o.dims, static_cast<uint64_t>(batch));
  if (!feeds.ok()) {
    p.oom = feeds.status().code() == StatusCode::kOutOfMemory;
    p.error = feeds.status().message();
    return p;
  }
  // Two untimed runs: the first chooses algorithms and plans, the second captures a CUDA graph.
  std::vector<double> ms;
  int64_t peak = 0;
  if (util) util->start();
  for (int i = 0; i < 2 + o.iterations; ++i) {
    RunProfile prof;
    const auto a = Clock::now();
    auto out = s.run(*feeds, &prof);
    const double dt = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
    if (!out.ok()) {
      if (util) util->stop();
      p.oom = out.status().code() == StatusCode::kOutOfMemory;
      p.error = out.status().message();
      p.seconds = seconds_since(t0);
      return p;
    }
    peak = std::max({peak, prof.peak_device_bytes, prof.peak_intermediate_bytes});
    if (i >= 2) ms.push_back(dt);
  }
  if (util) p.gpu_util = util->stop();
  double sum = 0;
  for (double x : ms) sum += x;
  p.ok = true;
  p.p50_ms = percentile(ms, 0.5);
  p.p99_ms = percentile(ms, 0.99);
  p.throughput = sum > 0 ? static_cast<double>(batch) * static_cast<double>(ms.size()) * 1000.0 / sum : 0;
  p.memory_bytes = peak;
  p.seconds = seconds_since(t0);
  return p;
}

void search_offline(const TuneOptions& o, const std::string& precision, Searcher& sr) {
  std::unique_ptr<Session> s;
  auto fresh = [&]() -> bool {
    s.reset();  // the old session's memory goes back first
    auto l = load_session(o, precision);
    if (!l.ok()) {
      sr.result.notes.push_back(fmt::format("{}: not searched: {}", precision, l.status().message()));
      return false;
    }
    s = std::move(*l);
    return true;
  };
  if (!fresh()) return;
  if (s->inputs().empty() || !s->inputs()[0].dynamic_batch()) {
    sr.result.notes.push_back(fmt::format("{}: the model's first input has a fixed batch: only batch {} is run", precision,
                                          s->inputs().empty() || s->inputs()[0].shape.empty() ? 1 : s->inputs()[0].shape[0]));
  }
  const bool dynamic = !s->inputs().empty() && s->inputs()[0].dynamic_batch();
  const int64_t limit = dynamic ? o.max_batch : 1;
  int64_t last_ok = 0, first_bad = 0;
  auto try_batch = [&](int64_t b) -> int {  // 1 fit, 0 did not fit, -1 stop (time, or another failure)
    if (sr.out_of_time()) return -1;
    sr.begin(fmt::format("offline {} batch {}", precision, b));
    Point p = measure_offline(*s, o, precision, b, sr.util);
    const bool oom = p.oom;
    const bool ok = p.ok;
    const bool slow = ok && o.latency_budget_ms > 0 && p.p99_ms > o.latency_budget_ms;
    sr.add(std::move(p));
    if (oom) {
      fresh();  // a failed run may leave its pool fragmented: start clean
      return s ? 0 : -1;
    }
    if (!ok) return -1;
    return slow ? 2 : 1;
  };
  for (int64_t b = 1; b <= limit; b *= 2) {
    const int r = try_batch(b);
    if (r == 1) {
      last_ok = b;
      continue;
    }
    if (r == 0) first_bad = b;
    if (r == 2) last_ok = b;  // fits, but over the latency budget: larger batches only get slower
    break;
  }
  // Binary search between the last batch that fit and the first that did not.
  int64_t lo = last_ok, hi = first_bad;
  while (hi > 0 && hi - lo > 1 && s) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int r = try_batch(mid);
    if (r < 0) break;
    if (r == 0) hi = mid;
    else lo = mid;
  }
  sr.result.memory_edge[precision] = hi;
  sr.result.best_batch[precision] = lo;
}

}  // namespace gpuopt::tune
