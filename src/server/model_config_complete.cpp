// ModelConfig vs the model file: fill what the config leaves out, check what it states, and the
// JSON form Triton's /config endpoint returns.
#include "server/model_config.h"

namespace gpuopt::server {
namespace {

// The model's shape as the config would state it (batch dim dropped when batching).
Shape config_dims(const IoSpec& io, int64_t max_batch) {
  Shape s = io.shape;
  for (auto& d : s)
    if (d < 0) d = -1;
  if (max_batch > 0 && !s.empty()) s.erase(s.begin());
  return s;
}

Status check_tensor(const std::string& cfg_name, const TensorConfig& t, const IoSpec& io, int64_t max_batch,
                    const char* kind) {
  if (t.dtype != io.dtype)
    return Status::InvalidArgument("model '{}': {} '{}' has data_type {} in the config but {} in the model", cfg_name,
                                   kind, t.name, dtype_triton_name(t.dtype), dtype_triton_name(io.dtype));
  if (!io.rank_known) return Status::Ok();
  Shape want = t.reshape ? *t.reshape : t.dims;
  if (max_batch > 0) want.insert(want.begin(), -1);
  if (want.size() != io.shape.size())
    return Status::InvalidArgument(
        "model '{}': {} '{}' has {} dims in the config{} ({}{}) but the model's rank is {} ({})", cfg_name, kind,
        t.name, t.reshape ? t.reshape->size() : t.dims.size(), t.reshape ? " reshape" : "",
        dims_string(t.reshape ? *t.reshape : t.dims), max_batch > 0 ? " plus the batch dim" : "", io.shape.size(),
        dims_string(io.shape));
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] >= 0 && io.shape[i] >= 0 && want[i] != io.shape[i])
      return Status::InvalidArgument("model '{}': {} '{}' dim {} is {} in the config but {} in the model", cfg_name,
                                     kind, t.name, i, want[i], io.shape[i]);
  if (t.reshape) {
    int64_t a = shape_numel(t.dims), b = shape_numel(*t.reshape);
    if (a >= 0 && b >= 0 && a != b)
      return Status::InvalidArgument("model '{}': {} '{}' reshape {} does not hold the {} elements of dims {}",
                                     cfg_name, kind, t.name, dims_string(*t.reshape), a, dims_string(t.dims));
  }
  return Status::Ok();
}

Status complete_list(const std::string& cfg_name, std::vector<TensorConfig>* list, const std::vector<IoSpec>& model,
                     int64_t max_batch, const char* kind, bool require_all) {
  if (list->empty()) {
    for (const IoSpec& io : model)
      list->push_back(TensorConfig{io.name, io.dtype, config_dims(io, max_batch), {}, false});
    return Status::Ok();
  }
  for (const TensorConfig& t : *list) {
    const IoSpec* io = nullptr;
    for (const auto& m : model)
      if (m.name == t.name) io = &m;
    if (!io) {
      std::string names;
      for (const auto& m : model) names += (names.empty() ? "'" : ", '") + m.name + "'";
      return Status::InvalidArgument("model '{}': config {} '{}' is not in the model (it has {})", cfg_name, kind,
                                     t.name, names);
    }
    GPUOPT_RETURN_IF_ERROR(check_tensor(cfg_name, t, *io, max_batch, kind));
  }
  if (require_all)
    for (const IoSpec& io : model) {
      bool found = false;
      for (const auto& t : *list) found |= t.name == io.name;
      if (!found)
        return Status::InvalidArgument("model '{}': model {} '{}' is missing from the config", cfg_name, kind, io.name);
    }
  return Status::Ok();
}

}  // namespace

Status complete_model_config(ModelConfig* c, const std::vector<IoSpec>& inputs, const std::vector<IoSpec>& outputs,
                             bool had_config_file, int64_t default_max_batch_size) {
  auto batchable = [](const std::vector<IoSpec>& v) {
    for (const auto& io : v)
      if (!io.rank_known || io.shape.empty() || io.shape[0] >= 0) return false;
    return !v.empty();
  };
  if (!had_config_file) {
    if (batchable(inputs) && batchable(outputs) && default_max_batch_size > 0) {
      c->max_batch_size = default_max_batch_size;
      c->dynamic_batching.emplace();  // as Triton's auto-complete does for batching models
    }
  }
  if (c->max_batch_size > 0) {
    for (const auto* v : {&inputs, &outputs})
      for (const IoSpec& io : *v)
        if (io.rank_known && (io.shape.empty() || io.shape[0] >= 0))
          return Status::InvalidArgument(
              "model '{}': max_batch_size is {} but '{}' has no dynamic first (batch) dim: {} (set max_batch_size: 0)",
              c->name, c->max_batch_size, io.name, dims_string(io.shape));
  }
  GPUOPT_RETURN_IF_ERROR(complete_list(c->name, &c->inputs, inputs, c->max_batch_size, "input", true));
  GPUOPT_RETURN_IF_ERROR(complete_list(c->name, &c->outputs, outputs, c->max_batch_size, "output", false));
  if (c->dynamic_batching && c->max_batch_size == 0) {
    c->warnings.push_back(fmt::format("model '{}': dynamic_batching has no effect with max_batch_size 0", c->name));
    c->dynamic_batching.reset();
  }
  if (c->dynamic_batching)
    for (int64_t p : c->dynamic_batching->preferred_batch_size)
      if (p > c->max_batch_size)
        return Status::InvalidArgument("model '{}': preferred_batch_size {} is larger than max_batch_size {}", c->name,
                                       p, c->max_batch_size);
  if (c->padding.axis > 0) {
    if (c->max_batch_size == 0)
      return Status::InvalidArgument("model '{}': gpuopt.pad_axis needs batching (max_batch_size > 0)", c->name);
    for (const auto& t : c->inputs) {
      Shape full = t.dims;
      full.insert(full.begin(), -1);
      if (c->padding.axis < static_cast<int>(full.size()) && full[c->padding.axis] != -1)
        return Status::InvalidArgument("model '{}': gpuopt.pad_axis {} is not a variable (-1) dim of input '{}' {}",
                                       c->name, c->padding.axis, t.name, dims_string(t.dims));
    }
  }
  if (c->instance_groups.empty()) c->instance_groups.push_back(InstanceGroup{});
  for (size_t i = 0; i < c->instance_groups.size(); ++i)
    if (c->instance_groups[i].name.empty()) c->instance_groups[i].name = c->name + "_" + std::to_string(i);
  if (c->platform.empty() && c->backend.empty()) {
    c->platform = "onnxruntime_onnx";
    c->backend = "onnxruntime";
  }
  return Status::Ok();
}

nlohmann::json model_config_json(const ModelConfig& c) {
  using nlohmann::json;
  auto tensors = [](const std::vector<TensorConfig>& v, bool input) {
    json a = json::array();
    for (const auto& t : v) {
      json j = {{"name", t.name}, {"data_type", dtype_triton_name(t.dtype)}, {"dims", t.dims}};
      if (t.reshape) j["reshape"] = {{"shape", *t.reshape}};
      if (input) {
        j["format"] = "FORMAT_NONE";
        j["is_shape_tensor"] = false;
        j["allow_ragged_batch"] = false;
        j["optional"] = t.optional;
      } else {
        j["label_filename"] = "";
        j["is_shape_tensor"] = false;
      }
      a.push_back(std::move(j));
    }
    return a;
  };
  json vp;
  switch (c.version_policy.kind) {
    case VersionPolicy::Kind::kLatest:
      vp = {{"latest", {{"num_versions", c.version_policy.num_versions}}}};
      break;
    case VersionPolicy::Kind::kAll:
      vp = {{"all", json::object()}};
      break;
    case VersionPolicy::Kind::kSpecific:
      vp = {{"specific", {{"versions", c.version_policy.versions}}}};
      break;
  }
  json j = {{"name", c.name},
            {"platform", c.platform},
            {"backend", c.backend},
            {"version_policy", vp},
            {"max_batch_size", c.max_batch_size},
            {"input", tensors(c.inputs, true)},
            {"output", tensors(c.outputs, false)},
            {"batch_input", json::array()},
            {"batch_output", json::array()},
            {"default_model_filename", c.default_model_filename}};
  auto policy = [](const QueuePolicy& q) {
    return json{{"timeout_action", q.timeout_action == TimeoutAction::kReject ? "REJECT" : "DELAY"},
                {"default_timeout_microseconds", q.default_timeout_us},
                {"allow_timeout_override", q.allow_timeout_override},
                {"max_queue_size", q.max_queue_size}};
  };
  if (c.dynamic_batching) {
    const auto& d = *c.dynamic_batching;
    json pq = json::object();
    for (auto& [k, v] : d.priority_queue_policy) pq[std::to_string(k)] = policy(v);
    j["dynamic_batching"] = {{"preferred_batch_size", d.preferred_batch_size},
                             {"max_queue_delay_microseconds", d.max_queue_delay_us},
                             {"preserve_ordering", d.preserve_ordering},
                             {"priority_levels", d.priority_levels},
                             {"default_priority_level", d.default_priority_level},
                             {"default_queue_policy", policy(d.default_queue_policy)},
                             {"priority_queue_policy", pq}};
  }
  json groups = json::array();
  for (const auto& g : c.instance_groups) {
    const char* kind = g.kind == InstanceKind::kGpu   ? "KIND_GPU"
                       : g.kind == InstanceKind::kCpu ? "KIND_CPU"
                                                      : "KIND_AUTO";
    groups.push_back({{"name", g.name}, {"kind", kind}, {"count", g.count}, {"gpus", g.gpus}});
  }
  j["instance_group"] = groups;
  json warm = json::array();
  for (const auto& w : c.warmups) {
    json ins = json::object();
    for (auto& [k, v] : w.inputs) {
      json x = {{"data_type", dtype_triton_name(v.dtype)}, {"dims", v.dims}};
      if (v.source == WarmupInput::Source::kZero) x["zero_data"] = true;
      if (v.source == WarmupInput::Source::kRandom) x["random_data"] = true;
      if (v.source == WarmupInput::Source::kFile) x["input_data_file"] = v.file;
      ins[k] = x;
    }
    warm.push_back({{"name", w.name}, {"batch_size", w.batch_size}, {"count", w.count}, {"inputs", ins}});
  }
  j["model_warmup"] = warm;
  json params = json::object();
  for (auto& [k, v] : c.parameters) params[k] = {{"string_value", v}};
  j["parameters"] = params;
  return j;
}

}  // namespace gpuopt::server
