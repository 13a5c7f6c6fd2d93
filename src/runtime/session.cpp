// Session: load -> passes -> compile on a backend -> run with validated, named inputs.
#include "gpuopt/session.h"

#include "backends/backend.h"
#include "backends/deferred_capture.h"
#include "backends/pipelined.h"
#include "backends/plan_cache.h"
#include "core/log.h"
#include "ir/graph.h"
#include "onnx/importer.h"
#include "engine/compile.h"
#include "runtime/plan_key.h"

#include <fmt/ranges.h>

#include <map>

namespace gpuopt {
namespace {

TensorInfo make_info(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  TensorInfo t;
  t.name = v.name;
  t.dtype = v.info.dtype;
  t.rank_known = v.info.rank_known;
  for (int64_t d : v.info.shape) {
    t.shape.push_back(d >= 0 ? d : -1);
    t.dims.push_back(g.symbol_name(d));
  }
  return t;
}

std::string names_of(const std::vector<TensorInfo>& infos) {
  std::vector<std::string> n;
  for (const auto& i : infos) n.push_back(i.name);
  return fmt::format("{}", fmt::join(n, ", "));
}

}  // namespace

std::string TensorInfo::shape_string() const {
  if (!rank_known) return "[?]";
  return fmt::format("[{}]", fmt::join(dims, ","));
}

Session::Session() = default;
Session::~Session() = default;

std::string plan_cache_settings(std::string_view precision, bool optimize, const KernelSettings& settings) {
  return fmt::format("{}|{}|{}", precision, optimize, settings.key());
}

Result<std::unique_ptr<Session>> Session::load(const std::string& model_path, const SessionOptions& options) {
  SessionOptions resolved = options;
  GPUOPT_ASSIGN_OR_RETURN(resolved.kernels, KernelSettings::or_env(options.kernels));
  GPUOPT_ASSIGN_OR_RETURN(Graph g, load_onnx_model(model_path));
  std::string hash;
  if (!options.cache_dir.empty() && options.device.is_cuda()) {
    GPUOPT_ASSIGN_OR_RETURN(hash, model_hash(model_path, plan_cache_settings(options.precision, options.optimize,
                                                                             *resolved.kernels)));
  }
  std::unique_ptr<Session> s(new Session());
  GPUOPT_RETURN_IF_ERROR(s->init(std::move(g), resolved, hash));
  return s;
}

Result<std::unique_ptr<Session>> Session::from_graph(Graph graph, const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session());
  GPUOPT_RETURN_IF_ERROR(s->init(std::move(graph), options));
  return s;
}

int Session::opset() const { return graph_->opset; }

PlanCacheStatus Session::plan_cache() const {
  PlanCacheStatus st = exe_->plan_cache();
  if (st.state == "off" && !options_.cache_dir.empty() && st.note.empty())
    st.note = options_.device.is_cuda() ? "a session built from a graph in memory has no plan cache"
                                        : "the plan cache holds CUDA choices only";
  return st;
}

Status Session::init(Graph graph, const SessionOptions& options, const std::string& model_hash) {
  options_ = options;
  // The environment supplies what the caller did not set; from here on the session's own copy.
  GPUOPT_ASSIGN_OR_RETURN(options_.kernels, KernelSettings::or_env(options.kernels));
  EngineOptions eo;
  eo.device = options.device;
  GPUOPT_ASSIGN_OR_RETURN(eo.precision, parse_precision(options.precision));
  eo.optimize = options.optimize;
  eo.kernels = *options_.kernels;
  eo.memory_limit = options.memory_limit;
  eo.cuda_graphs = options.cuda_graphs;
  if (!model_hash.empty()) {
    eo.cache_dir = options.cache_dir;
    eo.model_hash = model_hash;
  }
  GPUOPT_ASSIGN_OR_RETURN(Compiled c, compile(std::move(graph), eo));
  graph_ = std::move(c.graph);
  backend_ = std::move(c.backend);
  exe_ = std::move(c.exe);
  for (ValueId v : graph_->inputs()) inputs_.push_back(make_info(*graph_, v));
  for (ValueId v : graph_->outputs()) outputs_.push_back(make_info(*graph_, v));
  // The plan cache's captured shapes: now, before the session is handed out, unless deferred.
  if (!options.defer_graph_capture)
    while (capture_deferred_shape()) {
    }
  return Status::Ok();
}

bool Session::capture_deferred_shape() {
  auto* d = dynamic_cast<DeferredCapture*>(exe_.get());
  return d && d->capture_next_cached_shape();
}

Status Session::validate(const std::vector<Tensor>& inputs) const {
  // Each symbol (e.g. "batch") must take one value across all inputs.
  std::map<int64_t, std::pair<int64_t, std::string>> bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorInfo& want = inputs_[i];
    const Value& v = graph_->value(graph_->inputs()[i]);
    if (!t.defined()) return Status::InvalidArgument("input '{}' has no data", want.name);
    if (!t.is_cpu()) return Status::InvalidArgument("input '{}' must be a host tensor", want.name);
    if (t.dtype() != want.dtype)
      return Status::InvalidArgument("input '{}': dtype {} given, the model expects {}", want.name, dtype_name(t.dtype()),
                                     dtype_name(want.dtype));
    if (!want.rank_known) continue;
    if (t.rank() != static_cast<int64_t>(want.shape.size()))
      return Status::InvalidArgument("input '{}': rank {} given ({}), the model expects rank {} {}", want.name, t.rank(),
                                     shape_to_string(t.shape()), want.shape.size(), want.shape_string());
    for (size_t d = 0; d < want.shape.size(); ++d) {
      const int64_t decl = v.info.shape[d];
      const int64_t got = t.shape()[d];
      if (decl >= 0 && got != decl)
        return Status::InvalidArgument("input '{}': dim {} is {}, the model expects {} (shape {})", want.name, d, got,
                                       decl, want.shape_string());
      if (decl <= kFirstSymbolDim) {
        auto [it, fresh] = bound.emplace(decl, std::make_pair(got, want.name));
        if (!fresh && it->second.first != got)
          return Status::InvalidArgument("input '{}': dim {} ({}) is {}, but input '{}' gave {}={}", want.name, d,
                                         want.dims[d], got, it->second.second, want.dims[d], it->second.first);
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> Session::run_ordered(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != inputs_.size())
    return Status::InvalidArgument("{} inputs given, the model has {} ({})", inputs.size(), inputs_.size(),
                                   names_of(inputs_));
  GPUOPT_RETURN_IF_ERROR(validate(inputs));
  return exe_->run(inputs, {});
}

Status Session::begin_ordered(const std::vector<Tensor>& inputs) {
  if (begun_ >= kPipelineDepth)
    return Status::FailedPrecondition("{} runs begun and not finished (the most at once)", kPipelineDepth);
  if (inputs.size() != inputs_.size())
    return Status::InvalidArgument("{} inputs given, the model has {} ({})", inputs.size(), inputs_.size(),
                                   names_of(inputs_));
  GPUOPT_RETURN_IF_ERROR(validate(inputs));
  if (auto* p = dynamic_cast<PipelinedExecutable*>(exe_.get())) {
    GPUOPT_RETURN_IF_ERROR(p->begin(inputs));
  } else {
    done_.push_back(exe_->run(inputs, {}));
  }
  ++begun_;
  return Status::Ok();
}

Result<std::vector<Tensor>> Session::finish_ordered() {
  if (begun_ == 0) return Status::FailedPrecondition("finish_ordered: no run was begun");
  --begun_;
  if (auto* p = dynamic_cast<PipelinedExecutable*>(exe_.get())) return p->finish();
  Result<std::vector<Tensor>> r = std::move(done_.front());
  done_.erase(done_.begin());
  return r;
}

Result<NamedTensors> Session::run(const NamedTensors& named) const { return run(named, nullptr); }

Result<NamedTensors> Session::run(const NamedTensors& named, RunProfile* profile) const {
  std::vector<Tensor> ordered(inputs_.size());
  std::vector<bool> given(inputs_.size(), false);
  for (const auto& [name, t] : named) {
    size_t k = 0;
    while (k < inputs_.size() && inputs_[k].name != name) ++k;
    if (k == inputs_.size())
      return Status::InvalidArgument("unknown input '{}' (the model's inputs: {})", name, names_of(inputs_));
    if (given[k]) return Status::InvalidArgument("input '{}' is given twice", name);
    given[k] = true;
    ordered[k] = t;
  }
  for (size_t k = 0; k < inputs_.size(); ++k)
    if (!given[k])
      return Status::InvalidArgument("missing input '{}' ({} {}); the model's inputs: {}", inputs_[k].name,
                                     dtype_name(inputs_[k].dtype), inputs_[k].shape_string(), names_of(inputs_));
  GPUOPT_RETURN_IF_ERROR(validate(ordered));
  RunOptions ro;
  ro.profile = profile;
  GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, exe_->run(ordered, ro));
  NamedTensors result;
  for (size_t i = 0; i < outs.size(); ++i) result.emplace_back(outputs_[i].name, std::move(outs[i]));
  return result;
}

}  // namespace gpuopt
