// config.pbtxt -> ModelConfig: protobuf's TextFormat reads the text into Triton's own schema
// (third_party/triton/model_config.proto); this file gives the fields meaning and refuses what
// gpuopt does not do. Every message names the file and line (from TextFormat's ParseInfoTree).
#include "server/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <set>

#include "engine/compile.h"
#include "gpuopt/kernel_settings.h"
#include "model_config.pb.h"

namespace gpuopt::server {
namespace {

namespace pb = inference;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::TextFormat;
using Tree = TextFormat::ParseInfoTree;

// Syntax errors from TextFormat, with the file name and 1-based line:column.
class Errors : public google::protobuf::io::ErrorCollector {
 public:
  explicit Errors(const std::string& src) : src_(src) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = fmt::format("{}:{}:{}: {}", src_, line + 1, column + 1, message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string src_;
  std::string first_;
};

struct Ctx {
  std::string src;
  std::vector<std::string>* warnings;
};

// Where one field (element `index` of a repeated one) was written; a Tree may be null.
int line_of(const Tree* t, const Message& m, const char* field, int index = -1) {
  if (!t) return 0;
  const FieldDescriptor* fd = m.GetDescriptor()->FindFieldByName(field);
  if (!fd) return 0;
  auto loc = t->GetLocation(fd, fd->is_repeated() ? std::max(index, 0) : -1);
  return loc.line + 1;
}

const Tree* nested(const Tree* t, const Message& m, const char* field, int index = -1) {
  if (!t) return nullptr;
  const FieldDescriptor* fd = m.GetDescriptor()->FindFieldByName(field);
  return fd ? t->GetTreeForNested(fd, fd->is_repeated() ? std::max(index, 0) : -1) : nullptr;
}

Status field_error(const Ctx& c, int line, const std::string& field, const std::string& what) {
  return Status::InvalidArgument("{}:{}: '{}': {}", c.src, line, field, what);
}

// Every field set in `m` must be one gpuopt handles, or one with no effect on results (a
// warning), or it is refused by name: a field that would change how the model runs.
Status check_fields(const Ctx& c, const Tree* t, const Message& m, const std::string& scope,
                    const std::set<std::string>& handled, const std::set<std::string>& no_effect = {}) {
  std::vector<const FieldDescriptor*> set;
  m.GetReflection()->ListFields(m, &set);
  for (const FieldDescriptor* fd : set) {
    const std::string& n = fd->name();
    if (handled.count(n)) continue;
    int line = line_of(t, m, n.c_str());
    if (no_effect.count(n)) {
      c.warnings->push_back(
          fmt::format("{}:{}: field '{}{}' has no effect in gpuopt and is ignored", c.src, line, scope, n));
      continue;
    }
    return Status::Unimplemented("{}:{}: field '{}{}' is not supported by gpuopt (it would change how the model runs)",
                                 c.src, line, scope, n);
  }
  return Status::Ok();
}

Result<DType> to_dtype(const Ctx& c, int line, const std::string& field, pb::DataType t) {
  if (t == pb::TYPE_INVALID) return field_error(c, line, field, "no data_type (expected TYPE_FP32, TYPE_INT64, ...)");
  auto d = dtype_from_triton(pb::DataType_Name(t));
  if (!d) return field_error(c, line, field, fmt::format("data type {} is not supported", pb::DataType_Name(t)));
  return *d;
}

template <typename T>
Status parse_tensor(const Ctx& c, const Tree* t, const T& m, TensorConfig* out, bool is_input) {
  const std::string scope = is_input ? "input." : "output.";
  if constexpr (std::is_same_v<T, pb::ModelInput>) {
    GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, scope, {"name", "data_type", "dims", "reshape", "optional"},
                                        {"format"}));
    out->optional = m.optional();
  } else {
    GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, scope, {"name", "data_type", "dims", "reshape"}, {"label_filename"}));
  }
  out->name = m.name();
  if (out->name.empty()) return Status::InvalidArgument("{}: an {} has no name", c.src, is_input ? "input" : "output");
  if (m.data_type() == pb::TYPE_INVALID)
    return Status::InvalidArgument("{}: {} '{}' has no data_type", c.src, is_input ? "input" : "output", out->name);
  GPUOPT_ASSIGN_OR_RETURN(out->dtype, to_dtype(c, line_of(t, m, "data_type"), scope + "data_type", m.data_type()));
  for (int i = 0; i < m.dims_size(); ++i) {
    if (m.dims(i) < -1)
      return field_error(c, line_of(t, m, "dims", i), "dims", fmt::format("dims must be -1 or >= 0, found {}", m.dims(i)));
    out->dims.push_back(m.dims(i));
  }
  if (m.has_reshape()) out->reshape = Shape(m.reshape().shape().begin(), m.reshape().shape().end());
  return Status::Ok();
}

Status parse_queue_policy(const Ctx& c, const pb::ModelQueuePolicy& m, QueuePolicy* q) {
  q->timeout_action = m.timeout_action() == pb::ModelQueuePolicy::DELAY ? TimeoutAction::kDelay : TimeoutAction::kReject;
  q->default_timeout_us = m.default_timeout_microseconds();
  q->allow_timeout_override = m.allow_timeout_override();
  q->max_queue_size = m.max_queue_size();
  return Status::Ok();
}

Status parse_dynamic_batching(const Ctx& c, const Tree* t, const pb::ModelDynamicBatching& m, DynamicBatching* d) {
  GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, "dynamic_batching.",
                                      {"preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering",
                                       "priority_levels", "default_priority_level", "default_queue_policy",
                                       "priority_queue_policy"}));
  for (int i = 0; i < m.preferred_batch_size_size(); ++i) {
    int64_t v = m.preferred_batch_size(i);
    if (v <= 0)
      return field_error(c, line_of(t, m, "preferred_batch_size", i), "preferred_batch_size",
                         fmt::format("must be positive, found {}", v));
    d->preferred_batch_size.push_back(v);
  }
  d->max_queue_delay_us = m.max_queue_delay_microseconds();
  d->preserve_ordering = m.preserve_ordering();
  if (m.priority_levels() > 1000000 || m.default_priority_level() > 1000000)
    return Status::InvalidArgument("{}: dynamic_batching.priority_levels {} is beyond 1000000", c.src,
                                   std::max(m.priority_levels(), m.default_priority_level()));
  d->priority_levels = static_cast<uint32_t>(m.priority_levels());
  d->default_priority_level = static_cast<uint32_t>(m.default_priority_level());
  GPUOPT_RETURN_IF_ERROR(parse_queue_policy(c, m.default_queue_policy(), &d->default_queue_policy));
  for (const auto& [k, v] : m.priority_queue_policy()) {
    if (k < 1 || k > d->priority_levels)
      return Status::InvalidArgument("{}: priority_queue_policy key {} is outside priority levels 1..{}", c.src, k,
                                     d->priority_levels);
    GPUOPT_RETURN_IF_ERROR(parse_queue_policy(c, v, &d->priority_queue_policy[static_cast<uint32_t>(k)]));
  }
  if (d->priority_levels > 0 && (d->default_priority_level < 1 || d->default_priority_level > d->priority_levels))
    return Status::InvalidArgument("{}: dynamic_batching.default_priority_level {} must be in 1..{}", c.src,
                                   d->default_priority_level, d->priority_levels);
  return Status::Ok();
}

Status parse_instance_group(const Ctx& c, const Tree* t, const pb::ModelInstanceGroup& m, InstanceGroup* g) {
  GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, "instance_group.", {"name", "count", "kind", "gpus"},
                                      {"profile", "host_policy", "rate_limiter"}));
  g->name = m.name();
  if (m.count() != 0) {  // 0 = not given: one instance
    if (m.count() < 1 || m.count() > 256)
      return field_error(c, line_of(t, m, "count"), "count", fmt::format("must be in 1..256, found {}", m.count()));
    g->count = m.count();
  }
  switch (m.kind()) {
    case pb::ModelInstanceGroup::KIND_GPU: g->kind = InstanceKind::kGpu; break;
    case pb::ModelInstanceGroup::KIND_CPU: g->kind = InstanceKind::kCpu; break;
    case pb::ModelInstanceGroup::KIND_AUTO: g->kind = InstanceKind::kAuto; break;
    default:
      return field_error(c, line_of(t, m, "kind"), "kind",
                         fmt::format("kind '{}' is not supported (KIND_GPU, KIND_CPU or KIND_AUTO)",
                                     pb::ModelInstanceGroup::Kind_Name(m.kind())));
  }
  for (int i = 0; i < m.gpus_size(); ++i) {
    if (m.gpus(i) < 0)
      return field_error(c, line_of(t, m, "gpus", i), "gpus", fmt::format("must not be negative, found {}", m.gpus(i)));
    g->gpus.push_back(m.gpus(i));
  }
  return Status::Ok();
}

Status parse_warmup(const Ctx& c, const Tree* t, const pb::ModelWarmup& m, Warmup* w) {
  GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, "model_warmup.", {"name", "batch_size", "count", "inputs"}));
  w->name = m.name();
  w->batch_size = m.batch_size();
  if (m.count() > 0) w->count = static_cast<int>(std::min<uint32_t>(m.count(), 1u << 20));
  for (const auto& [key, v] : m.inputs()) {
    if (key.empty()) return Status::InvalidArgument("{}: a warm-up input needs a 'key' (the input name)", c.src);
    WarmupInput in;
    GPUOPT_ASSIGN_OR_RETURN(in.dtype, to_dtype(c, line_of(t, m, "inputs"), "model_warmup.inputs.data_type", v.data_type()));
    for (int64_t d : v.dims()) {
      if (d < 0) return field_error(c, line_of(t, m, "inputs"), "model_warmup.inputs.dims", fmt::format("must not be negative, found {}", d));
      in.dims.push_back(d);
    }
    if (v.input_data_type_case() == pb::ModelWarmup::Input::kRandomData) in.source = WarmupInput::Source::kRandom;
    if (v.input_data_type_case() == pb::ModelWarmup::Input::kInputDataFile) {
      in.source = WarmupInput::Source::kFile;
      in.file = v.input_data_file();
    }
    w->inputs[key] = in;
  }
  return Status::Ok();
}

void parse_version_policy(const pb::ModelVersionPolicy& m, VersionPolicy* v) {
  if (m.has_all()) {
    v->kind = VersionPolicy::Kind::kAll;
  } else if (m.has_specific()) {
    v->kind = VersionPolicy::Kind::kSpecific;
    v->versions.assign(m.specific().versions().begin(), m.specific().versions().end());
  } else {
    v->kind = VersionPolicy::Kind::kLatest;
    if (m.has_latest() && m.latest().num_versions() > 0) v->num_versions = m.latest().num_versions();
  }
}

// Triton's way to ask for a precision: a "tensorrt" GPU execution accelerator's precision_mode
// (FP32, FP16, INT8) becomes the precision of the model's GPU instances. Its other parameters
// (workspace size, engine cache, ...) have no counterpart and are ignored with a warning; so is
// any other accelerator (gpuopt compiles every model itself).
Status parse_accelerators(const Ctx& c, const Tree* t, const pb::ModelOptimizationPolicy::ExecutionAccelerators& m,
                          ModelConfig* cfg) {
  for (int i = 0; i < m.gpu_execution_accelerator_size(); ++i) {
    const auto& a = m.gpu_execution_accelerator(i);
    const int at = line_of(t, m, "gpu_execution_accelerator", i);
    if (a.name() != "tensorrt") {
      c.warnings->push_back(fmt::format("{}:{}: GPU execution accelerator '{}' has no effect in gpuopt and is ignored",
                                        c.src, at, a.name()));
      continue;
    }
    for (const auto& [k, v] : a.parameters()) {
      if (k != "precision_mode") {
        c.warnings->push_back(fmt::format(
            "{}:{}: tensorrt accelerator parameter '{}' has no effect in gpuopt and is ignored", c.src, at, k));
        continue;
      }
      std::string p;
      if (v == "FP32") p = "fp32";
      else if (v == "FP16") p = "fp16";
      else if (v == "INT8") p = "int8";
      else
        return field_error(c, at, "optimization.execution_accelerators.gpu_execution_accelerator",
                           fmt::format("tensorrt precision_mode must be FP32, FP16 or INT8, found '{}'", v));
      if (!cfg->gpu_precision.empty() && cfg->gpu_precision != p)
        return field_error(c, at, "optimization.execution_accelerators.gpu_execution_accelerator",
                           fmt::format("two tensorrt accelerators ask for {} and {}", cfg->gpu_precision, p));
      cfg->gpu_precision = p;
    }
  }
  for (int i = 0; i < m.cpu_execution_accelerator_size(); ++i)
    c.warnings->push_back(fmt::format("{}:{}: CPU execution accelerator '{}' has no effect in gpuopt and is ignored",
                                      c.src, line_of(t, m, "cpu_execution_accelerator", i),
                                      m.cpu_execution_accelerator(i).name()));
  return Status::Ok();
}

// optimization { cuda { graphs: BOOL } } turns CUDA graphs on or off for the model's GPU
// instances (Triton's switch; gpuopt's default is on); execution_accelerators as above. The rest
// of `optimization` is ignored.
Status parse_optimization(const Ctx& c, const Tree* t, const pb::ModelOptimizationPolicy& m, ModelConfig* cfg) {
  std::vector<const FieldDescriptor*> set;
  m.GetReflection()->ListFields(m, &set);
  std::set<std::string> others;
  for (const FieldDescriptor* fd : set)
    if (fd->name() != "cuda" && fd->name() != "execution_accelerators") others.insert(fd->name());
  GPUOPT_RETURN_IF_ERROR(check_fields(c, t, m, "optimization.", {"cuda", "execution_accelerators"}, others));
  if (m.has_execution_accelerators())
    GPUOPT_RETURN_IF_ERROR(
        parse_accelerators(c, nested(t, m, "execution_accelerators"), m.execution_accelerators(), cfg));
  if (!m.has_cuda()) return Status::Ok();
  const auto& cuda = m.cuda();
  const FieldDescriptor* gfd = cuda.GetDescriptor()->FindFieldByName("graphs");
  const Tree* ct = nested(t, m, "cuda");
  // graphs: false is proto3's default, so whether it was written comes from the parse tree.
  if (cuda.graphs() || (ct && ct->GetLocation(gfd, -1).line >= 0)) cfg->cuda_graphs = cuda.graphs();
  std::vector<const FieldDescriptor*> cset;
  cuda.GetReflection()->ListFields(cuda, &cset);
  std::set<std::string> cuda_others;
  for (const FieldDescriptor* fd : cset)
    if (fd->name() != "graphs") cuda_others.insert(fd->name());
  return check_fields(c, ct, cuda, "optimization.cuda.", {"graphs"}, cuda_others);
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
    } else if (k.rfind("gpuopt.kernel.", 0) == 0) {
      KernelSettings probe;  // checked now: a bad name or value is the config's error
      if (Status st = probe.set(k.substr(14), v); !st.ok())
        return Status::InvalidArgument("{}: parameter {}: {}", src, k, st.message());
      cfg->kernels.emplace_back(k.substr(14), v);
    } else if (k == "gpuopt.precision") {
      if (!parse_precision(v).ok())
        return Status::InvalidArgument(
            "{}: parameter gpuopt.precision must be fp32, fp16, bf16, int8 or fp8, found '{}'", src, v);
      cfg->precision = v;
    } else if (k == "gpuopt.pipeline") {
      if (v != "on" && v != "off")
        return Status::InvalidArgument("{}: parameter gpuopt.pipeline must be on or off, found '{}'", src, v);
      cfg->pipeline = v == "on";
    } else {
      return Status::InvalidArgument(
          "{}: unknown parameter '{}' (known: gpuopt.kernel.GPUOPT_*, gpuopt.pad_axis, gpuopt.pad_buckets, "
          "gpuopt.pad_value, gpuopt.pipeline, gpuopt.precision)",
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

Result<ModelConfig> parse_model_config(std::string_view text, const std::string& source_name) {
  pb::ModelConfig m;
  Tree tree;
  Errors errors(source_name);
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (text.size() > size_t{64} << 20)
    return Status::InvalidArgument("{}: {} bytes is larger than a model configuration may be (64 MiB)", source_name,
                                   text.size());
  if (!parser.ParseFromString(std::string(text), &m))
    return Status::InvalidArgument("{}", errors.first().empty() ? source_name + ": not a valid model configuration"
                                                                : errors.first());
  ModelConfig cfg;
  Ctx c{source_name, &cfg.warnings};
  const Tree* t = &tree;
  // sequence_batching, ensemble_scheduling, batch_input, batch_output, model_transaction_policy
  // (decoupled), model_repository_agents, ... are refused by name.
  GPUOPT_RETURN_IF_ERROR(check_fields(
      c, t, m, "",
      {"name", "platform", "backend", "max_batch_size", "input", "output", "dynamic_batching", "instance_group",
       "model_warmup", "version_policy", "default_model_filename", "parameters", "optimization"},
      {"response_cache", "model_metrics", "runtime", "cc_model_filenames", "metric_tags", "model_operations"}));
  cfg.name = m.name();
  cfg.platform = m.platform();
  if (!cfg.platform.empty() && cfg.platform != "onnxruntime_onnx" && cfg.platform != "gpuopt_onnx")
    return field_error(c, line_of(t, m, "platform"), "platform",
                       fmt::format("platform '{}' is not supported (gpuopt serves ONNX models: onnxruntime_onnx)",
                                   cfg.platform));
  cfg.backend = m.backend();
  if (!cfg.backend.empty() && cfg.backend != "onnxruntime" && cfg.backend != "gpuopt")
    return field_error(c, line_of(t, m, "backend"), "backend",
                       fmt::format("backend '{}' is not supported (gpuopt serves ONNX models: onnxruntime)", cfg.backend));
  if (m.max_batch_size() < 0)
    return field_error(c, line_of(t, m, "max_batch_size"), "max_batch_size",
                       fmt::format("must not be negative, found {}", m.max_batch_size()));
  cfg.max_batch_size = m.max_batch_size();
  for (int i = 0; i < m.input_size(); ++i) {
    TensorConfig tc;
    GPUOPT_RETURN_IF_ERROR(parse_tensor(c, nested(t, m, "input", i), m.input(i), &tc, true));
    cfg.inputs.push_back(std::move(tc));
  }
  for (int i = 0; i < m.output_size(); ++i) {
    TensorConfig tc;
    GPUOPT_RETURN_IF_ERROR(parse_tensor(c, nested(t, m, "output", i), m.output(i), &tc, false));
    cfg.outputs.push_back(std::move(tc));
  }
  if (m.has_dynamic_batching()) {
    cfg.dynamic_batching.emplace();
    GPUOPT_RETURN_IF_ERROR(
        parse_dynamic_batching(c, nested(t, m, "dynamic_batching"), m.dynamic_batching(), &*cfg.dynamic_batching));
  }
  for (int i = 0; i < m.instance_group_size(); ++i) {
    InstanceGroup ig;
    GPUOPT_RETURN_IF_ERROR(parse_instance_group(c, nested(t, m, "instance_group", i), m.instance_group(i), &ig));
    cfg.instance_groups.push_back(std::move(ig));
  }
  for (int i = 0; i < m.model_warmup_size(); ++i) {
    Warmup w;
    GPUOPT_RETURN_IF_ERROR(parse_warmup(c, nested(t, m, "model_warmup", i), m.model_warmup(i), &w));
    cfg.warmups.push_back(std::move(w));
  }
  if (m.has_version_policy()) parse_version_policy(m.version_policy(), &cfg.version_policy);
  if (!m.default_model_filename().empty()) cfg.default_model_filename = m.default_model_filename();
  for (const auto& [k, v] : m.parameters()) cfg.parameters[k] = v.string_value();
  if (m.has_optimization())
    GPUOPT_RETURN_IF_ERROR(parse_optimization(c, nested(t, m, "optimization"), m.optimization(), &cfg));
  GPUOPT_RETURN_IF_ERROR(apply_padding_parameters(source_name, &cfg));
  if (!cfg.precision.empty() && !cfg.gpu_precision.empty() && cfg.precision != cfg.gpu_precision)
    return Status::InvalidArgument(
        "{}: parameter gpuopt.precision {} and the tensorrt accelerator's precision_mode {} disagree (give one)",
        source_name, cfg.precision, cfg.gpu_precision);
  return cfg;
}

}  // namespace gpuopt::server
