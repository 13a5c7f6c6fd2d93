// The pass pipelines as one table (pipeline.h): run_default_passes (every backend: the kDefault
// group) and run_session_passes (what a Session runs: the quantized passes, those, the precision
// conversion, then the device's layout passes), with the session's KernelSettings.
#include "passes/pipeline.h"

#include "core/env.h"
#include "core/log.h"
#include "passes/fusions.h"
#include "passes/merge_qkv.h"
#include "passes/passes.h"
#include "passes/precision.h"
#include "passes/fuse_dw_prologue.h"
#include "passes/se_mean.h"
#include "passes/window_attention.h"

#include <algorithm>
#include <initializer_list>
#include <iterator>

namespace gpuopt {

FusionSwitches FusionSwitches::parse(std::string_view value) {
  FusionSwitches sw;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    std::string_view item = value.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == "1" || item == "all")
      sw.all_off = true;
    else if (item.size() > 1 && item.front() == '+')
      sw.on.emplace_back(item.substr(1));
    else if (!item.empty() && item != "0")
      sw.off.emplace_back(item);
    start = end + 1;
  }
  return sw;
}

FusionSwitches FusionSwitches::from_env() {
  const auto v = env_get("GPUOPT_DISABLE_FUSION");
  return v ? parse(*v) : FusionSwitches{};
}

bool FusionSwitches::enabled(std::string_view pass) const {
  if (all_off) return false;
  for (const auto& n : off)
    if (n == pass) return false;
  return true;
}

bool FusionSwitches::opted_in(std::string_view pass) const {
  return enabled(pass) && std::find(on.begin(), on.end(), pass) != on.end();
}

Status FusionSwitches::validate() const {
  // '+name' turns on an opt-in pass; int8_residual is on by default now, '+int8_residual' is still accepted.
  for (const auto& n : on)
    if (n != "int8_residual")
      return Status::InvalidArgument("GPUOPT_DISABLE_FUSION: '+{}' is not an opt-in fusion (the opt-in ones: +int8_residual)", n);
  for (const auto& n : off)
    if (!is_fusion_name(n)) {
      std::string names;
      for (const FusionInfo& f : fusion_table()) names += (names.empty() ? "" : ", ") + std::string(f.name);
      return Status::InvalidArgument("GPUOPT_DISABLE_FUSION: unknown fusion '{}' (valid: 1 or all, or a list of {})", n,
                                     names);
    }
  return Status::Ok();
}

namespace {

using Ctx = PassContext;

// The shapes the next passes read (ranks, dtypes): the graph sorted and its shapes inferred.
Result<PassStats> sort_and_infer(Graph* g, const Ctx&) {
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return PassStats{};
}

Result<PassStats> infer(Graph* g, const Ctx&) {
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return PassStats{};
}

template <Result<PassStats> (*F)(Graph*)>
Result<PassStats> plain(Graph* g, const Ctx&) {
  return F(g);
}

bool gpu_opt(const Ctx& c) { return c.cuda() && c.optimize; }
bool int8_gpu(const Ctx& c) { return c.int8_gpu(); }
bool int8_gpu_opt(const Ctx& c) { return c.precision == "int8" && gpu_opt(c); }
// The channels-last passes: CUDA fp16/bf16 with the layout pass on.
bool nhwc(const Ctx& c) { return gpu_opt(c) && c.low() && c.sw.enabled("nhwc"); }

Result<PassStats> run_fold_qdq(Graph* g, const Ctx& c) {
  // Int8Conv only where the layout pass will make it channels-last (its CUDA kernel's form).
  return fold_qdq(g, c.settings.int8_conv && c.sw.enabled("nhwc"));
}

Result<PassStats> run_precision(Graph* g, const Ctx& c) {
  return convert_precision(g, c.compute_precision() == "fp16" ? DType::F16 : DType::BF16);
}

// Int8Conv -> Int8Add pairs (fold_qdq's, now in one layout) as one residual Int8Conv. On a
// compute capability 9.0 GPU a 1x1 one runs as one CUTLASS GEMM with the add inside
// (ops/quant/cuda/int8_conv1x1.h: ResNet-50 int8 b256 5.85 -> 5.17 ms); every other residual
// node runs as the pair did, unless GPUOPT_INT8_CONV1X1=0 asks for cuDNN's residual graphs
// (slower: 7.61 against 6.67 ms at 4a0272c). GPUOPT_DISABLE_FUSION=int8_residual turns it off.
bool has_int8_add(const Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(), [](const Node& n) { return n.op == Op::Int8Add; });
}
Result<PassStats> run_int8_residual(Graph* g, const Ctx&) {
  if (!has_int8_add(*g)) return PassStats{};
  return fuse_int8_residual(g);
}

constexpr auto Q = PassGroup::kQuantized;
constexpr auto D = PassGroup::kDefault;
constexpr auto V = PassGroup::kDevice;

}  // namespace

std::string_view PassContext::compute_precision() const {
  if (precision == "int8" || precision == "fp8") return cuda() ? "fp16" : "fp32";
  return precision;
}

std::span<const PassEntry> pass_table() {
  static const PassEntry kTable[] = {
      // At int8 on the GPU, before constant folding turns the weights' DequantizeLinear into
      // float constants: the model's QDQ pairs (gpuopt quantize writes them) become int8 nodes.
      {"pool_before_qdq", "qdq_pool", Q, &int8_gpu, &plain<pool_before_qdq>},  // exact (qdq_pool.cpp)
      {"drop_requantize", "qdq_requant", Q, &int8_gpu, &plain<drop_requantize>},  // exact (qdq_requant.cpp)
      {"fold_qdq", "qdq", Q, &int8_gpu, &run_fold_qdq},
      {"qdq_attention_in_float", "qdq_attention", Q, &int8_gpu_opt, &plain<qdq_attention_in_float>},
      // The default passes (every backend).
      {"fold_constants", "", D, nullptr, &plain<fold_constants>},
      {"fold_batchnorm", "", D, nullptr, &plain<fold_batchnorm>},
      {"eliminate_identity", "", D, nullptr, &plain<eliminate_identity>},
      {"eliminate_common_subexpressions", "", D, nullptr, &plain<eliminate_common_subexpressions>},
      // After dead-node removal, so a Conv output read also by a dead node still fuses.
      {"remove_dead_nodes", "", D, nullptr, &plain<remove_dead_nodes>},
      // Swin's cyclic shifts and patch merging as one copy each (window_attention.h).
      {"rolls_as_gathers", "roll", D, nullptr, &plain<rolls_as_gathers>},
      {"space_to_depth_as_transpose", "space_to_depth", D, nullptr, &plain<space_to_depth_as_transpose>},
      // Before the fusions: MatMul+Add, not yet Gemm, is what it sees through.
      {"sink_transposes", "transpose", D, nullptr, &plain<sink_transposes>},
      // Shapes known (the pass reads ranks); before the conv fusion, so 1-D convs fuse too.
      {"shapes", "conv1d", D, nullptr, &sort_and_infer},
      {"conv1d_as_2d", "conv1d", D, nullptr, &plain<conv1d_as_2d>},
      {"fuse_conv_activation", "conv", D, nullptr, &plain<fuse_conv_activation>},
      {"fuse_gelu", "gelu", D, nullptr, &plain<fuse_gelu>},
      {"shapes", "", D,  // the layernorm and attention fusions read ranks and dtypes
       [](const Ctx& c) { return c.sw.enabled("layernorm") || c.sw.enabled("attention"); }, &sort_and_infer},
      {"fuse_layernorm", "layernorm", D, nullptr, &plain<fuse_layernorm>},
      {"fuse_attention", "attention", D, nullptr, &plain<fuse_attention>},
      // The fused attentions' Q, K and V projections as one GEMM each, before fuse_matmul_bias
      // makes the merged MatMul + Add one Gemm.
      {"merge_qkv", "merge_qkv", D, [](const Ctx& c) { return c.sw.enabled("attention"); }, &plain<merge_qkv>},
      {"fuse_matmul_bias", "matmul_bias", D, nullptr, &plain<fuse_matmul_bias>},
      {"fold_gemm_scale", "gemm_scale", D, nullptr, &plain<fold_gemm_scale>},
      {"fuse_gemm_activation", "gemm_activation", D, nullptr, &plain<fuse_gemm_activation>},
      {"shapes", "skip_layernorm", D, nullptr, &infer},  // the pass compares the addends' shapes
      {"fuse_skip_layernorm", "skip_layernorm", D, nullptr, &plain<fuse_skip_layernorm>},
      {"shapes", "", D, nullptr, &sort_and_infer},
      // After the fusions (Gelu and SkipLayerNormalization written), before the precision pass.
      {"fuse_int8_epilogue", "int8_epilogue", V, &int8_gpu, &plain<fuse_int8_epilogue>},
      {"fuse_int8_norm", "int8_norm", V, &int8_gpu, &plain<fuse_int8_norm>},
      {"convert_precision", "", V, [](const Ctx& c) { return c.low(); }, &run_precision},
      // The attention masks cuDNN's SDPA reads expanded over the query rows once, not per call.
      {"expand_attention_masks", "attention_mask", V, [](const Ctx& c) { return gpu_opt(c) && c.sw.enabled("attention"); },
       &plain<expand_attention_masks>},
      // cuDNN's tensor-core convolutions are channels-last; NCHW ones transpose inside every call.
      {"layout_nhwc", "nhwc", V, &nhwc, &plain<layout_nhwc>},
      {"pack_nhwc_entries", "nhwc_entry", V, &nhwc, &plain<pack_nhwc_entries>},  // Cast + entry Transpose: one ToNhwc
      {"fuse_se_mean", "se_mean", V, &nhwc, &plain<fuse_se_mean>},  // squeeze-excitation means (se_mean.h)
      {"fuse_dw_prologue", "dw_prologue", V, &nhwc, &plain<fuse_dw_prologue>},  // (fuse_dw_prologue.h)
      {"fuse_int8_residual", "int8_residual", V, &gpu_opt, &run_int8_residual},
  };
  return kTable;
}

namespace {

// The entries of `groups` in table order that apply, each logged at debug and recorded.
Status run_table(Graph* g, const PassContext& c, std::initializer_list<PassGroup> groups, std::vector<PassRecord>* ran) {
  for (const PassEntry& e : pass_table()) {
    if (std::find(groups.begin(), groups.end(), e.group) == groups.end()) continue;
    if (!e.fusion.empty() && !c.sw.enabled(e.fusion)) continue;
    if (e.applies && !e.applies(c)) continue;
    GPUOPT_ASSIGN_OR_RETURN(PassStats st, e.run(g, c));
    if (e.name == "shapes") continue;  // shape inference between passes, not a pass of its own
    GPUOPT_LOG(debug, "passes: {}: removed {}, rewritten {}, added {}", e.name, st.removed, st.rewritten, st.added);
    if (ran) ran->push_back({std::string(e.name), st});
  }
  return Status::Ok();
}

}  // namespace

Status run_default_passes(Graph* g, const FusionSwitches& sw) {
  GPUOPT_RETURN_IF_ERROR(sw.validate());
  PassContext c;
  c.sw = sw;
  return run_table(g, c, {PassGroup::kDefault}, nullptr);
}

Status run_session_passes(Graph* g, const Device& device, std::string_view precision, bool optimize) {
  GPUOPT_ASSIGN_OR_RETURN(const KernelSettings settings, KernelSettings::from_env());
  return run_session_passes(g, device, precision, optimize, settings);
}

Status run_session_passes(Graph* g, const Device& device, std::string_view precision, bool optimize,
                          const KernelSettings& settings, std::vector<PassRecord>* ran) {
  PassContext c;
  c.device = device;
  c.precision = precision;
  c.optimize = optimize;
  c.sw = FusionSwitches::parse(settings.disable_fusion);
  c.settings = settings;
  GPUOPT_RETURN_IF_ERROR(c.sw.validate());
  if (precision != "fp32" && precision != "fp16" && precision != "bf16" && precision != "int8" && precision != "fp8")
    return Status::InvalidArgument("precision '{}' is not one of fp32, fp16, bf16, int8, fp8", precision);
  // int8: the model's QuantizeLinear/DequantizeLinear pairs carry the quantization (gpuopt
  // quantize writes them, docs/quantization.md); the float rest runs in fp16 on the GPU and f32
  // on the CPU reference, which keeps exact ONNX QDQ semantics.
  if (precision == "int8" && std::none_of(g->nodes().begin(), g->nodes().end(), [](const Node& n) {
        return n.op == Op::QuantizeLinear || n.op == Op::DequantizeLinear;
      }))
    return Status::InvalidArgument("precision {}: the model has no QuantizeLinear/DequantizeLinear nodes; quantize it "
                                   "first (gpuopt quantize MODEL --calibration DATA -o OUT.onnx)", precision);
  // fp8: Fp8Gemm nodes (passes/fp8.h) carry it; the float rest as int8's.
  if (precision == "fp8" && std::none_of(g->nodes().begin(), g->nodes().end(), [](const Node& n) { return n.op == Op::Fp8Gemm; }))
    return Status::InvalidArgument("precision fp8: the graph has no Fp8Gemm nodes; gpuopt run --precision fp8 "
                                   "calibrates a float model and writes them (docs/quantization.md)");
  if (optimize) return run_table(g, c, {PassGroup::kQuantized, PassGroup::kDefault, PassGroup::kDevice}, ran);
  return run_table(g, c, {PassGroup::kDevice}, ran);  // without optimize: the precision conversion alone
}

}  // namespace gpuopt
