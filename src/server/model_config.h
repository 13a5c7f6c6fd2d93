// Triton's model configuration (config.pbtxt), the fields gpuopt honours.
//
//   GPUOPT_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(text, "simple/config.pbtxt"));
//   GPUOPT_RETURN_IF_ERROR(complete_model_config(&c, model_inputs, model_outputs));  // fill/validate from the model
//   nlohmann::json j = model_config_json(c);   // GET /v2/models/simple/config
//
// Fields that would change results but are not supported (sequence_batching, ensembles,
// ragged batches, shape tensors, ...) are an error that names them; fields with no effect on
// results that gpuopt does not act on (optimization hints, response_cache, ...) are kept out
// with one warning.
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::server {

// What the model file declares for one input/output (dims include the batch dim; -1 = dynamic).
struct IoSpec {
  std::string name;
  DType dtype = DType::Undefined;
  Shape shape;
  bool rank_known = true;
};

struct TensorConfig {
  std::string name;
  DType dtype = DType::Undefined;
  Shape dims;                    // without the batch dim when max_batch_size > 0; -1 = variable
  std::optional<Shape> reshape;  // shape the model sees (without the batch dim)
  bool optional = false;
};

enum class TimeoutAction { kReject, kDelay };

struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  uint64_t default_timeout_us = 0;  // 0 = no timeout
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;  // 0 = unbounded
};

struct DynamicBatching {
  std::vector<int64_t> preferred_batch_size;
  uint64_t max_queue_delay_us = 0;
  bool preserve_ordering = false;
  uint32_t priority_levels = 0;  // 0 = one level; else levels 1..N, 1 is the highest
  uint32_t default_priority_level = 0;
  QueuePolicy default_queue_policy;
  std::map<uint32_t, QueuePolicy> priority_queue_policy;
};

enum class InstanceKind { kAuto, kGpu, kCpu };

struct InstanceGroup {
  std::string name;
  int count = 1;
  InstanceKind kind = InstanceKind::kAuto;
  std::vector<int> gpus;  // empty = every GPU (KIND_GPU)
};

struct WarmupInput {
  DType dtype = DType::Undefined;
  Shape dims;
  enum class Source { kZero, kRandom, kFile } source = Source::kZero;
  std::string file;  // input_data_file, relative to <model>/warmup/
};

struct Warmup {
  std::string name;
  int64_t batch_size = 1;
  int count = 1;
  std::map<std::string, WarmupInput> inputs;
};

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific } kind = Kind::kLatest;
  uint32_t num_versions = 1;
  std::vector<int64_t> versions;
};

// gpuopt's sequence padding (set through `parameters`, Triton's extension point):
//   parameters { key: "gpuopt.pad_axis" value { string_value: "1" } }   # pad inputs along this axis
//   parameters { key: "gpuopt.pad_buckets" value { string_value: "16,32,64,128" } }
//   parameters { key: "gpuopt.pad_value" value { string_value: "0" } }
// Requests whose lengths differ are padded to the same bucket and batched together; outputs
// with that axis are cut back to each request's own length.
struct SequencePadding {
  int axis = 0;  // in the model's full shape (batch dim is axis 0); 0 = off
  std::vector<int64_t> buckets;
  double value = 0.0;
};

struct ModelConfig {
  std::string name;
  std::string platform;
  std::string backend;
  int64_t max_batch_size = 0;
  std::vector<TensorConfig> inputs;
  std::vector<TensorConfig> outputs;
  std::optional<DynamicBatching> dynamic_batching;
  std::vector<InstanceGroup> instance_groups;
  std::vector<Warmup> warmups;
  VersionPolicy version_policy;
  std::string default_model_filename = "model.onnx";
  std::map<std::string, std::string> parameters;
  SequencePadding padding;
  std::string precision;              // parameters gpuopt.precision: fp32, fp16, bf16, int8, fp8 ("" = server default)
  // Of the GPU instances only: optimization { execution_accelerators { gpu_execution_accelerator
  // [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ] } } (FP32, FP16,
  // INT8 -> fp32, fp16, int8); `precision` wins where both are given (they must then agree).
  std::string gpu_precision;
  std::optional<bool> cuda_graphs;    // optimization { cuda { graphs: ... } } (unset = server default)
  bool pipeline = false;              // parameters gpuopt.pipeline: on = batches overlap on each instance
  // parameters gpuopt.kernel.NAME: a KernelSettings value (NAME a GPUOPT_* setting, checked here)
  // over the server's --kernel and environment, in the order given.
  std::vector<std::pair<std::string, std::string>> kernels;
  std::vector<std::string> warnings;  // ignored fields, one line each
};

Result<ModelConfig> parse_model_config(std::string_view text, const std::string& source_name);

// Fills what the config leaves out from the model (no inputs/outputs listed: all of them; no
// config at all: max_batch_size from a dynamic dim 0) and checks what it states against the
// model: names, dtypes, ranks and fixed dims. `default_max_batch_size` applies when there was no
// config.pbtxt and the model takes any batch.
Status complete_model_config(ModelConfig* config, const std::vector<IoSpec>& model_inputs,
                             const std::vector<IoSpec>& model_outputs, bool had_config_file,
                             int64_t default_max_batch_size);

// Triton's JSON form of the config (GET /v2/models/{m}/config).
nlohmann::json model_config_json(const ModelConfig& config);

// "TYPE_FP32" <-> DType.
std::optional<DType> dtype_from_triton(std::string_view name);
std::string dtype_triton_name(DType t);

}  // namespace gpuopt::server
