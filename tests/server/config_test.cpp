// config.pbtxt parsing and completion against a model's declared inputs/outputs.
#include "gpuopt/kernel_settings.h"

#include <gtest/gtest.h>

#include <string>

#include "server/model_config.h"

namespace gpuopt::server {
namespace {

constexpr const char* kFull = R"(
name: "simple"   # Triton's add_sub example
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0"  data_type: TYPE_FP32  dims: [ 16 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4, 4 ] reshape: { shape: [ 16 ] } }
]
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 allow_timeout_override: true max_queue_size: 16 }
  priority_queue_policy { key: 1 value: { max_queue_size: 4 } }
}
instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_GPU gpus: [0, 1] } ]
model_warmup { name: "w" batch_size: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [16] random_data: true } } }
version_policy: { latest { num_versions: 2 } }
parameters { key: "gpuopt.pad_buckets" value: { string_value: "8,16" } }
optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }
)";

TEST(Pbtxt, ParsesEveryFieldOfTheFullExample) {
  auto r = parse_model_config(kFull, "simple/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.name, "simple");
  EXPECT_EQ(c.max_batch_size, 8);
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[0].dtype, DType::F32);
  EXPECT_EQ(c.inputs[1].dims, (Shape{4, 4}));
  ASSERT_TRUE(c.inputs[1].reshape.has_value());
  EXPECT_EQ(*c.inputs[1].reshape, (Shape{16}));
  ASSERT_TRUE(c.dynamic_batching.has_value());
  const auto& d = *c.dynamic_batching;
  EXPECT_EQ(d.preferred_batch_size, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(d.max_queue_delay_us, 100u);
  EXPECT_TRUE(d.preserve_ordering);
  EXPECT_EQ(d.priority_levels, 2u);
  EXPECT_EQ(d.default_queue_policy.timeout_action, TimeoutAction::kDelay);
  EXPECT_EQ(d.default_queue_policy.default_timeout_us, 5000u);
  EXPECT_TRUE(d.default_queue_policy.allow_timeout_override);
  EXPECT_EQ(d.default_queue_policy.max_queue_size, 16u);
  EXPECT_EQ(d.priority_queue_policy.at(1).max_queue_size, 4u);
  ASSERT_EQ(c.instance_groups.size(), 2u);
  EXPECT_EQ(c.instance_groups[0].count, 2);
  EXPECT_EQ(c.instance_groups[0].kind, InstanceKind::kCpu);
  EXPECT_EQ(c.instance_groups[1].gpus, (std::vector<int>{0, 1}));
  ASSERT_EQ(c.warmups.size(), 1u);
  EXPECT_EQ(c.warmups[0].batch_size, 2);
  EXPECT_EQ(c.warmups[0].inputs.at("INPUT0").source, WarmupInput::Source::kRandom);
  EXPECT_EQ(c.version_policy.num_versions, 2u);
  EXPECT_EQ(c.padding.buckets, (std::vector<int64_t>{8, 16}));
  // A tensorrt accelerator without precision_mode: the server's precision applies, nothing to warn.
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
  EXPECT_TRUE(c.gpu_precision.empty());
}

TEST(Pbtxt, TensorrtPrecisionModeIsTheGpuInstancesPrecision) {
  for (auto [mode, want] : {std::pair{"FP16", "fp16"}, std::pair{"FP32", "fp32"}, std::pair{"INT8", "int8"}}) {
    auto r = parse_model_config(std::string(R"(name: "m"
optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: ")") + mode + R"(" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" } } ]
  cpu_execution_accelerator : [ { name : "openvino" } ] } }
)", "m/config.pbtxt");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->gpu_precision, want);
    EXPECT_TRUE(r->precision.empty());  // CPU instances keep the server's precision
    ASSERT_EQ(r->warnings.size(), 2u);  // the workspace size and the CPU accelerator: no effect
    EXPECT_NE(r->warnings[0].find("max_workspace_size_bytes"), std::string::npos) << r->warnings[0];
    EXPECT_NE(r->warnings[0].find("m/config.pbtxt:3:"), std::string::npos) << r->warnings[0];
    EXPECT_NE(r->warnings[1].find("openvino"), std::string::npos) << r->warnings[1];
  }
  auto bad = parse_model_config(R"(optimization { execution_accelerators { gpu_execution_accelerator : [
      { name : "tensorrt" parameters { key: "precision_mode" value: "FP8" } } ] } })", "m/config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("precision_mode must be FP32, FP16 or INT8, found 'FP8'"), std::string::npos)
      << bad.status().message();
  // gpuopt's own parameter wins only where both agree; two different answers are refused.
  auto both = parse_model_config(R"(parameters { key: "gpuopt.precision" value: { string_value: "fp16" } }
optimization { execution_accelerators { gpu_execution_accelerator : [
      { name : "tensorrt" parameters { key: "precision_mode" value: "INT8" } } ] } })", "m/config.pbtxt");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("disagree"), std::string::npos) << both.status().message();
  auto other = parse_model_config(R"(optimization { execution_accelerators { gpu_execution_accelerator : [
      { name : "cuda" } ] } })", "m/config.pbtxt");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->gpu_precision.empty());
  ASSERT_EQ(other->warnings.size(), 1u);
  EXPECT_NE(other->warnings[0].find("'cuda' has no effect"), std::string::npos) << other->warnings[0];
}

TEST(Pbtxt, PrecisionParameterTakesInt8AndFp8) {
  for (const char* p : {"fp32", "fp16", "bf16", "int8", "fp8"}) {
    auto r = parse_model_config(
        std::string(R"(parameters { key: "gpuopt.precision" value: { string_value: ")") + p + "\" } }", "m/config.pbtxt");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->precision, p);
  }
  auto bad = parse_model_config(R"(parameters { key: "gpuopt.precision" value: { string_value: "int4" } })",
                                "m/config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp32, fp16, bf16, int8 or fp8, found 'int4'"), std::string::npos);
}

TEST(Pbtxt, KernelParametersAreKernelSettings) {
  auto r = parse_model_config(R"(parameters { key: "gpuopt.kernel.GPUOPT_DISABLE_FUSION" value: { string_value: "gelu" } }
parameters { key: "gpuopt.kernel.GPUOPT_FA_WARPS" value: { string_value: "8" } })",
                              "m/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->kernels.size(), 2u);
  KernelSettings ks;
  for (const auto& [k, v] : r->kernels) ASSERT_TRUE(ks.set(k, v).ok()) << k;
  EXPECT_EQ(ks.disable_fusion, "gelu");
  EXPECT_EQ(ks.fa_warps, 8);
  // A bad value or name is the config's error, in KernelSettings' words.
  auto bad = parse_model_config(R"(parameters { key: "gpuopt.kernel.GPUOPT_FA_WARPS" value: { string_value: "6" } })",
                                "m/config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "m/config.pbtxt: parameter gpuopt.kernel.GPUOPT_FA_WARPS: GPUOPT_FA_WARPS='6': expected auto, 4 or 8");
  auto unknown = parse_model_config(R"(parameters { key: "gpuopt.kernel.GPUOPT_NOPE" value: { string_value: "1" } })",
                                    "m/config.pbtxt");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'GPUOPT_NOPE' is not a kernel setting"), std::string::npos)
      << unknown.status().message();
}

TEST(Pbtxt, OptimizationCudaGraphsSwitch) {
  auto unset = parse_model_config("name: \"m\"", "m/config.pbtxt");
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->cuda_graphs.has_value());  // the server's default applies
  auto off = parse_model_config("optimization { cuda { graphs: false busy_wait_events: true } }", "m/config.pbtxt");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  ASSERT_TRUE(off->cuda_graphs.has_value());
  EXPECT_FALSE(*off->cuda_graphs);
  ASSERT_EQ(off->warnings.size(), 1u);
  EXPECT_NE(off->warnings[0].find("optimization.cuda.busy_wait_events"), std::string::npos) << off->warnings[0];
  auto on = parse_model_config("optimization { cuda { graphs: true } }", "m/config.pbtxt");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->cuda_graphs.value_or(false));
  auto bad = parse_model_config("optimization { cuda { graphs: 3 } }", "m/config.pbtxt");
  EXPECT_FALSE(bad.ok());
}

TEST(Pbtxt, UnsupportedFieldsThatChangeResultsAreNamed) {
  auto r = parse_model_config("name: \"m\"\nsequence_batching { }\n", "m/config.pbtxt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m/config.pbtxt:2: field 'sequence_batching' is not supported"),
            std::string::npos)
      << r.status().message();
  auto ragged = parse_model_config("input { name: \"x\" data_type: TYPE_FP32 dims: [-1] allow_ragged_batch: true }",
                                   "m/config.pbtxt");
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("input.allow_ragged_batch"), std::string::npos);
  auto plat = parse_model_config("platform: \"tensorrt_plan\"", "m/config.pbtxt");
  ASSERT_FALSE(plat.ok());
  EXPECT_NE(plat.status().message().find("tensorrt_plan"), std::string::npos);
}

TEST(Pbtxt, SyntaxErrorsNameTheLine) {
  for (const char* bad : {"name: \"x\nmax_batch_size: 1", "input { name: \"x\"", "max_batch_size 4", "dims: [1, 2",
                          "max_batch_size: -3", "max_batch_size: abc", "@", "input { data_type: TYPE_FOO }"}) {
    auto r = parse_model_config(bad, "m/config.pbtxt");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("m/config.pbtxt"), std::string::npos) << r.status().message();
  }
  auto r = parse_model_config("name: \"m\"\n\n  max_batch_size: x", "c.pbtxt");
  EXPECT_NE(r.status().message().find("c.pbtxt:3:"), std::string::npos) << r.status().message();
}

TEST(Pbtxt, AlternativeSyntaxes) {
  // Angle brackets, ';' and ',' separators, single quotes with escapes, adjacent strings joined:
  // protobuf's text format as Triton reads it.
  auto r = parse_model_config(
      "name: 'q\\'x'; platform: \"onnxruntime\" \"_onnx\", version_policy < latest < num_versions: 3 > >\n"
      "input [ { name: \"a\" data_type: TYPE_INT64 dims: [1, 2,3] } ]",
      "t");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "q'x");
  EXPECT_EQ(r->platform, "onnxruntime_onnx");
  EXPECT_EQ(r->version_policy.num_versions, 3u);
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].dims, (Shape{1, 2, 3}));
  EXPECT_EQ(r->inputs[0].dtype, DType::I64);
  // A field that is not in Triton's schema is named by the parser, with its line.
  auto unknown = parse_model_config("name: \"m\"\nmax_batch: 4", "m/config.pbtxt");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("m/config.pbtxt:2:"), std::string::npos) << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("max_batch"), std::string::npos) << unknown.status().message();
}

std::vector<IoSpec> add_sub_inputs() {
  return {{"INPUT0", DType::F32, {-1, 16}, true}, {"INPUT1", DType::F32, {-1, 16}, true}};
}

TEST(ModelConfigComplete, DerivedFromTheModelWithoutAConfig) {
  ModelConfig c;
  c.name = "m";
  std::vector<IoSpec> outs = {{"OUT", DType::F32, {-1, 16}, true}};
  ASSERT_TRUE(complete_model_config(&c, add_sub_inputs(), outs, false, 4).ok());
  EXPECT_EQ(c.max_batch_size, 4);
  EXPECT_TRUE(c.dynamic_batching.has_value());
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[0].dims, (Shape{16}));
  EXPECT_EQ(c.instance_groups.size(), 1u);
  // A fixed batch dim: no batching.
  ModelConfig f;
  f.name = "f";
  ASSERT_TRUE(
      complete_model_config(&f, {{"X", DType::F32, {1, 3}, true}}, {{"Y", DType::F32, {1, 3}, true}}, false, 4).ok());
  EXPECT_EQ(f.max_batch_size, 0);
  EXPECT_EQ(f.inputs[0].dims, (Shape{1, 3}));
  auto j = model_config_json(c);
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(j["max_batch_size"], 4);
}

TEST(ModelConfigComplete, MismatchesWithTheModelAreErrors) {
  std::vector<IoSpec> outs = {{"OUT", DType::F32, {-1, 16}, true}};
  auto check = [&](const char* text, const char* want) {
    auto c = parse_model_config(text, "m/config.pbtxt");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    c->name = "m";
    Status s = complete_model_config(&*c, add_sub_inputs(), outs, true, 4);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  };
  check("max_batch_size: 4 input { name: \"INPUT0\" data_type: TYPE_INT32 dims: [16] }", "TYPE_INT32");
  check("max_batch_size: 4 input { name: \"NOPE\" data_type: TYPE_FP32 dims: [16] }", "'NOPE' is not in the model");
  check("max_batch_size: 4 input { name: \"INPUT0\" data_type: TYPE_FP32 dims: [15] }", "dim 1 is 15");
  check("max_batch_size: 4 input { name: \"INPUT0\" data_type: TYPE_FP32 dims: [16] }", "'INPUT1' is missing");
  check("max_batch_size: 2 dynamic_batching { preferred_batch_size: 4 }", "preferred_batch_size 4");
}

}  // namespace
}  // namespace gpuopt::server
