// profile_model: load (timed), warm up, run node by node; annotate_nodes: shapes, bytes, FLOPs.
#include "profile/profile.h"

#include "profile/kernels.h"

#include "engine/analysis.h"
#include "ir/graph.h"
#include "onnx/importer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

namespace gpuopt::profile {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<NodeInfo> annotate_nodes(const Graph& graph, const NamedTensors& inputs) {
  std::vector<NodeInfo> out(graph.nodes().size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].name = graph.nodes()[i].name;
    out[i].op = graph.nodes()[i].op_type;
  }
  // Every symbolic input dim bound to the given tensor's dim; FLOPs, bytes and shapes per node as
  // `gpuopt inspect` counts them (engine/analysis.h node_costs: one count for both).
  std::vector<std::pair<std::string, int64_t>> symbols;
  for (ValueId in : graph.inputs()) {
    const Value& v = graph.value(in);
    auto it = std::find_if(inputs.begin(), inputs.end(), [&](const auto& kv) { return kv.first == v.name; });
    if (it == inputs.end() || !v.info.rank_known) continue;
    for (size_t d = 0; d < v.info.shape.size() && d < static_cast<size_t>(it->second.rank()); ++d)
      if (v.info.shape[d] <= kFirstSymbolDim) symbols.emplace_back(graph.symbol_name(v.info.shape[d]), it->second.dim(d));
  }
  auto bound = bind_shapes(graph, symbols, 0);
  if (!bound.ok()) return out;
  const std::vector<NodeCost> costs = node_costs(*bound);
  for (size_t i = 0; i < out.size(); ++i) {
    if (costs[i].folded) continue;  // folded away: shape arithmetic
    out[i].shapes = costs[i].shapes;
    out[i].dtype = costs[i].dtype;
    out[i].bytes = costs[i].bytes;
    out[i].flops = costs[i].flops;
  }
  return out;
}

Result<ProfileResult> profile_model(const ProfileOptions& o, const FeedsFn& feeds_fn) {
  ProfileResult r;
  r.model = o.model;
  r.device = o.session.device.to_string();
  r.precision = o.session.precision;
  double t0 = now_us();
  GPUOPT_ASSIGN_OR_RETURN(Graph g, load_onnx_model(o.model));
  double t1 = now_us();
  r.spans.push_back({"import", "load", t0, t1 - t0, {{"file", o.model}}});
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::from_graph(std::move(g), o.session));
  double t2 = now_us();
  r.spans.push_back({"compile", "load", t1, t2 - t1,
                     {{"what", "shape inference, passes, placement, plan, constant upload"},
                      {"device", o.session.device.to_string()},
                      {"precision", o.session.precision}}});
  GPUOPT_ASSIGN_OR_RETURN(NamedTensors feeds, feeds_fn(*s));
  if (!feeds.empty() && feeds[0].second.rank() > 0 && !s->inputs().empty() && s->inputs()[0].dynamic_batch())
    r.batch = feeds[0].second.dim(0);
  std::vector<double> normal, device;
  for (int i = 0; i < o.warmup; ++i) {
    RunProfile p;
    const double a = now_us();
    auto out = s->run(feeds, &p);
    const double b = now_us();
    if (!out.ok()) return out.status().with_context(fmt::format("warm-up run {}", i + 1));
    r.spans.push_back({fmt::format("run {} ({})", i + 1, p.mode.empty() ? "cpu" : p.mode), "warm-up", a, b - a,
                       {{"note", p.graph_note}, {"device_us", p.device_us}}});
    normal.push_back(b - a);
    if (p.device_us > 0) device.push_back(p.device_us);
    r.normal_mode = p.mode;
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  r.normal_run_us = median(normal);
  r.normal_device_us = median(device);
  GPUOPT_RETURN_IF_ERROR(profile_runs(*s, feeds, o.runs, &r, o.kernels));
  return r;
}

Status profile_runs(const Session& s, const NamedTensors& feeds, int runs, ProfileResult* r, bool kernels) {
  std::unique_ptr<KernelCapture> capture;
  r->kernels_recorded = false;
  r->kernels_note.clear();
  if (kernels && s.device().kind == DeviceKind::kCuda) {
    auto c = KernelCapture::start();
    if (c.ok())
      capture = std::move(c).value();
    else
      r->kernels_note = c.status().message();
  }
  for (int i = 0; i < runs; ++i) {
    ProfiledRun pr;
    pr.profile.per_node = true;
    pr.start_us = now_us();
    auto out = s.run(feeds, &pr.profile);
    pr.end_us = now_us();
    if (!out.ok()) return out.status().with_context(fmt::format("profiled run {}", i + 1));
    r->runs.push_back(std::move(pr));
  }
  if (capture) {
    auto k = capture->finish(&r->kernels_note);
    if (k.ok()) {
      attach_kernels(std::move(k).value(), r);
      r->kernels_recorded = true;
    } else {
      r->kernels_note = k.status().message();
    }
  }
  r->nodes = annotate_nodes(s.graph(), feeds);
  return Status::Ok();
}

}  // namespace gpuopt::profile
