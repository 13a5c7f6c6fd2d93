// config.pbtxt -> ModelConfig: the meaning of each field, and what is refused.
#include "server/model_config.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "server/pbtxt.h"

namespace gpuopt::server {
namespace {

struct Ctx {
  std::string src;
  std::vector<std::string>* warnings;
};

Status field_error(const Ctx& c, const PbField& f, const std::string& what) {
  return Status::InvalidArgument("{}:{}: '{}': {}", c.src, f.line, f.name, what);
}

// A field gpuopt does not implement and that would change results: refuse, naming it.
Status unsupported(const Ctx& c, const PbField& f, const std::string& scope) {
  return Status::Unimplemented("{}:{}: field '{}{}' is not supported by gpuopt (it would change how the model runs)",
                               c.src, f.line, scope, f.name);
}

// Known fields that do not change results: accepted with a warning.
void ignored(const Ctx& c, const PbField& f, const std::string& scope) {
  c.warnings->push_back(
      fmt::format("{}:{}: field '{}{}' has no effect in gpuopt and is ignored", c.src, f.line, scope, f.name));
}

Result<int64_t> to_int(const Ctx& c, const PbField& f) {
  if (f.is_message) return field_error(c, f, "expected an integer, found a message");
  int64_t v = 0;
  const char* b = f.scalar.data();
  const char* e = b + f.scalar.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e) return field_error(c, f, fmt::format("expected an integer, found '{}'", f.scalar));
  return v;
}

Result<int64_t> to_nonneg(const Ctx& c, const PbField& f) {
  GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_int(c, f));
  if (v < 0) return field_error(c, f, fmt::format("must not be negative, found {}", v));
  return v;
}

Result<bool> to_bool(const Ctx& c, const PbField& f) {
  if (f.scalar == "true" || f.scalar == "True" || f.scalar == "1") return true;
  if (f.scalar == "false" || f.scalar == "False" || f.scalar == "0") return false;
  return field_error(c, f, fmt::format("expected true or false, found '{}'", f.scalar));
}

Result<std::string> to_str(const Ctx& c, const PbField& f) {
  if (f.is_message) return field_error(c, f, "expected a string, found a message");
  return f.scalar;
}

Result<const PbMessage*> to_msg(const Ctx& c, const PbField& f) {
  if (!f.is_message) return field_error(c, f, fmt::format("expected a message {{ ... }}, found '{}'", f.scalar));
  return f.message.get();
}

Result<DType> to_dtype(const Ctx& c, const PbField& f) {
  auto d = dtype_from_triton(f.scalar);
  if (!d)
    return field_error(c, f, fmt::format("unknown data type '{}' (expected TYPE_FP32, TYPE_INT64, ...)", f.scalar));
  return *d;
}

Status parse_tensor(const Ctx& c, const PbMessage& m, TensorConfig* t, bool is_input) {
  const std::string scope = is_input ? "input." : "output.";
  for (const PbField& f : m.fields) {
    if (f.name == "name") {
      GPUOPT_ASSIGN_OR_RETURN(t->name, to_str(c, f));
    } else if (f.name == "data_type") {
      GPUOPT_ASSIGN_OR_RETURN(t->dtype, to_dtype(c, f));
    } else if (f.name == "dims") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t d, to_int(c, f));
      if (d < -1) return field_error(c, f, fmt::format("dims must be -1 or >= 0, found {}", d));
      t->dims.push_back(d);
    } else if (f.name == "reshape") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* r, to_msg(c, f));
      t->reshape.emplace();
      for (const PbField& s : r->fields) {
        if (s.name != "shape") return unsupported(c, s, scope + "reshape.");
        GPUOPT_ASSIGN_OR_RETURN(int64_t d, to_int(c, s));
        t->reshape->push_back(d);
      }
    } else if (f.name == "optional" && is_input) {
      GPUOPT_ASSIGN_OR_RETURN(t->optional, to_bool(c, f));
    } else if (f.name == "format" || f.name == "label_filename") {
      ignored(c, f, scope);
    } else if (f.name == "is_shape_tensor" || f.name == "allow_ragged_batch" || f.name == "is_non_linear_format_io") {
      GPUOPT_ASSIGN_OR_RETURN(bool on, to_bool(c, f));
      if (on) return unsupported(c, f, scope);
    } else {
      return unsupported(c, f, scope);
    }
  }
  if (t->name.empty()) return Status::InvalidArgument("{}: an {} has no name", c.src, is_input ? "input" : "output");
  if (t->dtype == DType::Undefined)
    return Status::InvalidArgument("{}: {} '{}' has no data_type", c.src, is_input ? "input" : "output", t->name);
  return Status::Ok();
}

Status parse_queue_policy(const Ctx& c, const PbMessage& m, QueuePolicy* q, const std::string& scope) {
  for (const PbField& f : m.fields) {
    if (f.name == "timeout_action") {
      if (f.scalar == "REJECT")
        q->timeout_action = TimeoutAction::kReject;
      else if (f.scalar == "DELAY")
        q->timeout_action = TimeoutAction::kDelay;
      else
        return field_error(c, f, fmt::format("expected REJECT or DELAY, found '{}'", f.scalar));
    } else if (f.name == "default_timeout_microseconds") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      q->default_timeout_us = static_cast<uint64_t>(v);
    } else if (f.name == "allow_timeout_override") {
      GPUOPT_ASSIGN_OR_RETURN(q->allow_timeout_override, to_bool(c, f));
    } else if (f.name == "max_queue_size") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      q->max_queue_size = static_cast<uint32_t>(v);
    } else {
      return unsupported(c, f, scope);
    }
  }
  return Status::Ok();
}

Status parse_dynamic_batching(const Ctx& c, const PbMessage& m, DynamicBatching* d) {
  const std::string scope = "dynamic_batching.";
  for (const PbField& f : m.fields) {
    if (f.name == "preferred_batch_size") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_int(c, f));
      if (v <= 0) return field_error(c, f, fmt::format("must be positive, found {}", v));
      d->preferred_batch_size.push_back(v);
    } else if (f.name == "max_queue_delay_microseconds") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      d->max_queue_delay_us = static_cast<uint64_t>(v);
    } else if (f.name == "preserve_ordering") {
      GPUOPT_ASSIGN_OR_RETURN(d->preserve_ordering, to_bool(c, f));
    } else if (f.name == "priority_levels") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      d->priority_levels = static_cast<uint32_t>(v);
    } else if (f.name == "default_priority_level") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      d->default_priority_level = static_cast<uint32_t>(v);
    } else if (f.name == "default_queue_policy") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* q, to_msg(c, f));
      GPUOPT_RETURN_IF_ERROR(parse_queue_policy(c, *q, &d->default_queue_policy, scope + "default_queue_policy."));
    } else if (f.name == "priority_queue_policy") {
      // map<uint64, ModelQueuePolicy>: entries { key: 1 value { ... } }
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* e, to_msg(c, f));
      int64_t key = -1;
      const PbMessage* value = nullptr;
      for (const PbField& kv : e->fields) {
        if (kv.name == "key") {
          GPUOPT_ASSIGN_OR_RETURN(key, to_nonneg(c, kv));
        } else if (kv.name == "value") {
          GPUOPT_ASSIGN_OR_RETURN(value, to_msg(c, kv));
        } else {
          return unsupported(c, kv, scope + "priority_queue_policy.");
        }
      }
      if (key < 1 || !value) return field_error(c, f, "needs 'key' (a priority level >= 1) and 'value'");
      QueuePolicy q;
      GPUOPT_RETURN_IF_ERROR(parse_queue_policy(c, *value, &q, scope + "priority_queue_policy."));
      d->priority_queue_policy[static_cast<uint32_t>(key)] = q;
    } else if (f.name == "preferred_batch_size_multiple" || f.name == "default_max_queue_delay") {
      return unsupported(c, f, scope);
    } else {
      return unsupported(c, f, scope);
    }
  }
  if (d->priority_levels > 0 && (d->default_priority_level < 1 || d->default_priority_level > d->priority_levels))
    return Status::InvalidArgument("{}: dynamic_batching.default_priority_level {} must be in 1..{}", c.src,
                                   d->default_priority_level, d->priority_levels);
  for (auto& [k, v] : d->priority_queue_policy)
    if (k > d->priority_levels)
      return Status::InvalidArgument("{}: priority_queue_policy key {} is above priority_levels {}", c.src, k,
                                     d->priority_levels);
  return Status::Ok();
}

Status parse_instance_group(const Ctx& c, const PbMessage& m, InstanceGroup* g) {
  for (const PbField& f : m.fields) {
    if (f.name == "name") {
      GPUOPT_ASSIGN_OR_RETURN(g->name, to_str(c, f));
    } else if (f.name == "count") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_int(c, f));
      if (v < 1 || v > 256) return field_error(c, f, fmt::format("must be in 1..256, found {}", v));
      g->count = static_cast<int>(v);
    } else if (f.name == "kind") {
      if (f.scalar == "KIND_GPU")
        g->kind = InstanceKind::kGpu;
      else if (f.scalar == "KIND_CPU")
        g->kind = InstanceKind::kCpu;
      else if (f.scalar == "KIND_AUTO")
        g->kind = InstanceKind::kAuto;
      else
        return field_error(c, f, fmt::format("kind '{}' is not supported (KIND_GPU, KIND_CPU or KIND_AUTO)", f.scalar));
    } else if (f.name == "gpus") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      g->gpus.push_back(static_cast<int>(v));
    } else if (f.name == "profile" || f.name == "host_policy" || f.name == "rate_limiter" || f.name == "passive") {
      if (f.name == "passive" && f.scalar == "true") return unsupported(c, f, "instance_group.");
      ignored(c, f, "instance_group.");
    } else {
      return unsupported(c, f, "instance_group.");
    }
  }
  return Status::Ok();
}

Status parse_warmup(const Ctx& c, const PbMessage& m, Warmup* w) {
  for (const PbField& f : m.fields) {
    if (f.name == "name") {
      GPUOPT_ASSIGN_OR_RETURN(w->name, to_str(c, f));
    } else if (f.name == "batch_size") {
      GPUOPT_ASSIGN_OR_RETURN(w->batch_size, to_nonneg(c, f));
    } else if (f.name == "count") {
      GPUOPT_ASSIGN_OR_RETURN(int64_t v, to_nonneg(c, f));
      w->count = static_cast<int>(v);
    } else if (f.name == "inputs") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* e, to_msg(c, f));
      std::string key;
      WarmupInput in;
      for (const PbField& kv : e->fields) {
        if (kv.name == "key") {
          GPUOPT_ASSIGN_OR_RETURN(key, to_str(c, kv));
        } else if (kv.name == "value") {
          GPUOPT_ASSIGN_OR_RETURN(const PbMessage* v, to_msg(c, kv));
          for (const PbField& x : v->fields) {
            if (x.name == "data_type") {
              GPUOPT_ASSIGN_OR_RETURN(in.dtype, to_dtype(c, x));
            } else if (x.name == "dims") {
              GPUOPT_ASSIGN_OR_RETURN(int64_t d, to_nonneg(c, x));
              in.dims.push_back(d);
            } else if (x.name == "zero_data") {
              in.source = WarmupInput::Source::kZero;
            } else if (x.name == "random_data") {
              in.source = WarmupInput::Source::kRandom;
            } else if (x.name == "input_data_file") {
              in.source = WarmupInput::Source::kFile;
              GPUOPT_ASSIGN_OR_RETURN(in.file, to_str(c, x));
            } else {
              return unsupported(c, x, "model_warmup.inputs.");
            }
          }
        } else {
          return unsupported(c, kv, "model_warmup.inputs.");
        }
      }
      if (key.empty()) return field_error(c, f, "a warm-up input needs a 'key' (the input name)");
      w->inputs[key] = in;
    } else {
      return unsupported(c, f, "model_warmup.");
    }
  }
  return Status::Ok();
}

Status parse_version_policy(const Ctx& c, const PbMessage& m, VersionPolicy* v) {
  for (const PbField& f : m.fields) {
    GPUOPT_ASSIGN_OR_RETURN(const PbMessage* b, to_msg(c, f));
    if (f.name == "latest") {
      v->kind = VersionPolicy::Kind::kLatest;
      for (const PbField& x : b->fields) {
        if (x.name != "num_versions") return unsupported(c, x, "version_policy.latest.");
        GPUOPT_ASSIGN_OR_RETURN(int64_t n, to_int(c, x));
        if (n < 1) return field_error(c, x, "must be at least 1");
        v->num_versions = static_cast<uint32_t>(n);
      }
    } else if (f.name == "all") {
      v->kind = VersionPolicy::Kind::kAll;
    } else if (f.name == "specific") {
      v->kind = VersionPolicy::Kind::kSpecific;
      for (const PbField& x : b->fields) {
        if (x.name != "versions") return unsupported(c, x, "version_policy.specific.");
        GPUOPT_ASSIGN_OR_RETURN(int64_t n, to_nonneg(c, x));
        v->versions.push_back(n);
      }
    } else {
      return unsupported(c, f, "version_policy.");
    }
  }
  return Status::Ok();
}

Status parse_parameter(const Ctx& c, const PbMessage& m, ModelConfig* cfg) {
  std::string key, value;
  for (const PbField& f : m.fields) {
    if (f.name == "key") {
      GPUOPT_ASSIGN_OR_RETURN(key, to_str(c, f));
    } else if (f.name == "value") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* v, to_msg(c, f));
      for (const PbField& x : v->fields) {
        if (x.name != "string_value") return unsupported(c, x, "parameters.value.");
        GPUOPT_ASSIGN_OR_RETURN(value, to_str(c, x));
      }
    } else {
      return unsupported(c, f, "parameters.");
    }
  }
  cfg->parameters[key] = value;
  return Status::Ok();
}

Status apply_padding_parameters(const std::string& src, ModelConfig* cfg) {
  for (auto& [k, v] : cfg->parameters) {
    if (k.rfind("gpuopt.", 0) != 0) continue;
    if (k == "gpuopt.pad_axis") {
      cfg->padding.axis = std::atoi(v.c_str());
      if (cfg->padding.axis < 1)
        return Status::InvalidArgument("{}: parameter gpuopt.pad_axis must be >= 1 (axis 0 is the batch), found '{}'",
                                       src, v);
    } else if (k == "gpuopt.pad_buckets") {
      size_t i = 0;
      while (i < v.size()) {
        size_t j = v.find(',', i);
        if (j == std::string::npos) j = v.size();
        int64_t b = std::atoll(v.substr(i, j - i).c_str());
        if (b <= 0 || (!cfg->padding.buckets.empty() && b <= cfg->padding.buckets.back()))
          return Status::InvalidArgument("{}: gpuopt.pad_buckets must be increasing positive lengths, found '{}'", src,
                                         v);
        cfg->padding.buckets.push_back(b);
        i = j + 1;
      }
    } else if (k == "gpuopt.pad_value") {
      cfg->padding.value = std::atof(v.c_str());
    } else if (k == "gpuopt.precision") {
      if (v != "fp32" && v != "fp16" && v != "bf16")
        return Status::InvalidArgument("{}: parameter gpuopt.precision must be fp32, fp16 or bf16, found '{}'", src, v);
      cfg->precision = v;
    } else {
      return Status::InvalidArgument(
          "{}: unknown parameter '{}' (known: gpuopt.pad_axis, gpuopt.pad_buckets, "
          "gpuopt.pad_value, gpuopt.precision)",
          src, k);
    }
  }
  return Status::Ok();
}

}  // namespace

std::optional<DType> dtype_from_triton(std::string_view name) {
  if (name.rfind("TYPE_", 0) != 0) return std::nullopt;
  std::string_view n = name.substr(5);
  if (n == "STRING") return DType::String;
  return dtype_from_kserve(n);
}

std::string dtype_triton_name(DType t) {
  if (t == DType::String) return "TYPE_STRING";
  return "TYPE_" + std::string(dtype_kserve_name(t));
}

// optimization { cuda { graphs: BOOL } } turns CUDA graphs on or off for the model's GPU
// instances (Triton's switch; gpuopt's default is on). The rest of `optimization` is ignored.
Status parse_optimization(const Ctx& c, const PbMessage& m, ModelConfig* cfg) {
  for (const PbField& f : m.fields) {
    if (f.name != "cuda") {
      ignored(c, f, "optimization.");
      continue;
    }
    GPUOPT_ASSIGN_OR_RETURN(const PbMessage* cuda, to_msg(c, f));
    for (const PbField& g : cuda->fields) {
      if (g.name == "graphs") {
        GPUOPT_ASSIGN_OR_RETURN(bool on, to_bool(c, g));
        cfg->cuda_graphs = on;
      } else {
        ignored(c, g, "optimization.cuda.");
      }
    }
  }
  return Status::Ok();
}

Result<ModelConfig> parse_model_config(std::string_view text, const std::string& source_name) {
  GPUOPT_ASSIGN_OR_RETURN(PbMessage m, parse_pbtxt(text, source_name));
  ModelConfig cfg;
  Ctx c{source_name, &cfg.warnings};
  for (const PbField& f : m.fields) {
    if (f.name == "name") {
      GPUOPT_ASSIGN_OR_RETURN(cfg.name, to_str(c, f));
    } else if (f.name == "platform") {
      GPUOPT_ASSIGN_OR_RETURN(cfg.platform, to_str(c, f));
      if (cfg.platform != "onnxruntime_onnx" && cfg.platform != "gpuopt_onnx")
        return field_error(c, f,
                           fmt::format("platform '{}' is not supported (gpuopt serves ONNX models: "
                                       "onnxruntime_onnx)",
                                       cfg.platform));
    } else if (f.name == "backend") {
      GPUOPT_ASSIGN_OR_RETURN(cfg.backend, to_str(c, f));
      if (cfg.backend != "onnxruntime" && cfg.backend != "gpuopt")
        return field_error(
            c, f, fmt::format("backend '{}' is not supported (gpuopt serves ONNX models: onnxruntime)", cfg.backend));
    } else if (f.name == "max_batch_size") {
      GPUOPT_ASSIGN_OR_RETURN(cfg.max_batch_size, to_nonneg(c, f));
    } else if (f.name == "input" || f.name == "output") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* t, to_msg(c, f));
      TensorConfig tc;
      GPUOPT_RETURN_IF_ERROR(parse_tensor(c, *t, &tc, f.name == "input"));
      (f.name == "input" ? cfg.inputs : cfg.outputs).push_back(std::move(tc));
    } else if (f.name == "dynamic_batching") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* d, to_msg(c, f));
      cfg.dynamic_batching.emplace();
      GPUOPT_RETURN_IF_ERROR(parse_dynamic_batching(c, *d, &*cfg.dynamic_batching));
    } else if (f.name == "instance_group") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* g, to_msg(c, f));
      InstanceGroup ig;
      GPUOPT_RETURN_IF_ERROR(parse_instance_group(c, *g, &ig));
      cfg.instance_groups.push_back(std::move(ig));
    } else if (f.name == "model_warmup") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* w, to_msg(c, f));
      Warmup wu;
      GPUOPT_RETURN_IF_ERROR(parse_warmup(c, *w, &wu));
      cfg.warmups.push_back(std::move(wu));
    } else if (f.name == "version_policy") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* v, to_msg(c, f));
      GPUOPT_RETURN_IF_ERROR(parse_version_policy(c, *v, &cfg.version_policy));
    } else if (f.name == "default_model_filename") {
      GPUOPT_ASSIGN_OR_RETURN(cfg.default_model_filename, to_str(c, f));
    } else if (f.name == "parameters") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* p, to_msg(c, f));
      GPUOPT_RETURN_IF_ERROR(parse_parameter(c, *p, &cfg));
    } else if (f.name == "optimization") {
      GPUOPT_ASSIGN_OR_RETURN(const PbMessage* o, to_msg(c, f));
      GPUOPT_RETURN_IF_ERROR(parse_optimization(c, *o, &cfg));
    } else if (f.name == "response_cache" || f.name == "model_metrics" ||
               f.name == "runtime" || f.name == "cc_model_filenames" || f.name == "metric_tags" ||
               f.name == "model_operations") {
      ignored(c, f, "");
    } else {
      // sequence_batching, ensemble_scheduling, batch_input, batch_output, model_transaction_policy
      // (decoupled), model_repository_agents, ...
      return unsupported(c, f, "");
    }
  }
  GPUOPT_RETURN_IF_ERROR(apply_padding_parameters(source_name, &cfg));
  return cfg;
}

}  // namespace gpuopt::server
