// EngineStats' histograms: Prometheus' bucket rule and vLLM's (v1) default bucket bounds, so a vLLM
// dashboard reads gpuopt's metrics unchanged but for the name prefix.
#include <algorithm>

#include "llm/engine.h"
#include "llm/engine_internal.h"

namespace gpuopt::llm {

void Histogram::observe(double v) {
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  // Prometheus buckets are "le": a value on a bound falls in that bound's bucket.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++counts[i];
  sum += v;
  ++count;
}

namespace {
Histogram with_bounds(std::vector<double> bounds) {
  Histogram h;
  h.bounds = std::move(bounds);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}
}  // namespace

EngineStats empty_engine_stats() {
  EngineStats s;
  s.time_to_first_token_s = with_bounds({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                         1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0});
  s.inter_token_latency_s = with_bounds(
      {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0});
  const std::vector<double> request = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                       30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  s.e2e_request_latency_s = with_bounds(request);
  s.queue_time_s = with_bounds(request);
  return s;
}

}  // namespace gpuopt::llm
