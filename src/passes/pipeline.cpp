// The pass pipelines: run_default_passes (every backend) and run_session_passes (what a Session
// runs: those, the precision conversion, then the device's layout pass), and the one reading of
// GPUOPT_DISABLE_FUSION they share.
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

Status run_default_passes(Graph* g, const FusionSwitches& sw) {
  GPUOPT_RETURN_IF_ERROR(sw.validate());
  GPUOPT_ASSIGN_OR_RETURN(PassStats folded, fold_constants(g));
  GPUOPT_ASSIGN_OR_RETURN(PassStats bn, fold_batchnorm(g));
  GPUOPT_ASSIGN_OR_RETURN(PassStats ident, eliminate_identity(g));
  GPUOPT_ASSIGN_OR_RETURN(PassStats common, eliminate_common_subexpressions(g));
  ident.removed += common.removed;
  GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
  if (sw.enabled("roll")) GPUOPT_RETURN_IF_ERROR(rolls_as_gathers(g).status());  // window_attention.h
  if (sw.enabled("space_to_depth")) GPUOPT_RETURN_IF_ERROR(space_to_depth_as_transpose(g).status());
  // After dead-node removal, so a Conv output read also by a dead node still fuses.
  PassStats conv, gelu, layernorm, attention, linear, sunk, qkv;
  if (sw.enabled("transpose")) {  // before the fusions: MatMul+Add, not yet Gemm, is what it sees through
    GPUOPT_ASSIGN_OR_RETURN(sunk, sink_transposes(g));
  }
  if (sw.enabled("conv1d")) {  // shapes known (the pass reads ranks); before the conv fusion, so 1-D convs fuse too
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());
    GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
    GPUOPT_ASSIGN_OR_RETURN(PassStats c1, conv1d_as_2d(g));
    (void)c1;
  }
  if (sw.enabled("conv")) {
    GPUOPT_ASSIGN_OR_RETURN(conv, fuse_conv_activation(g));
  }
  if (sw.enabled("gelu")) {
    GPUOPT_ASSIGN_OR_RETURN(gelu, fuse_gelu(g));
  }
  if (sw.enabled("layernorm") || sw.enabled("attention")) {
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());
    GPUOPT_RETURN_IF_ERROR(g->infer_shapes());  // these passes read ranks and dtypes
  }
  if (sw.enabled("layernorm")) {
    GPUOPT_ASSIGN_OR_RETURN(layernorm, fuse_layernorm(g));
  }
  if (sw.enabled("attention")) {
    GPUOPT_ASSIGN_OR_RETURN(attention, fuse_attention(g));
  }
  // The fused attentions' Q, K and V projections as one GEMM each, before fuse_matmul_bias makes
  // the merged MatMul + Add one Gemm.
  if (sw.enabled("attention") && sw.enabled("merge_qkv")) {
    GPUOPT_ASSIGN_OR_RETURN(qkv, merge_qkv(g));
  }
  if (sw.enabled("matmul_bias")) {
    GPUOPT_ASSIGN_OR_RETURN(linear, fuse_matmul_bias(g));
  }
  PassStats act, skip_ln, scale;
  if (sw.enabled("gemm_scale")) {
    GPUOPT_ASSIGN_OR_RETURN(scale, fold_gemm_scale(g));
  }
  if (sw.enabled("gemm_activation")) {
    GPUOPT_ASSIGN_OR_RETURN(act, fuse_gemm_activation(g));
  }
  if (sw.enabled("skip_layernorm")) {
    GPUOPT_RETURN_IF_ERROR(g->infer_shapes());  // the pass compares the addends' shapes
    GPUOPT_ASSIGN_OR_RETURN(skip_ln, fuse_skip_layernorm(g));
  }
  GPUOPT_LOG(debug,
             "passes: folded {}, batchnorms folded {}, identities {}, dead {}; fusions removed: conv {}, gelu {}, "
             "layernorm {}, attention {}, merge-qkv {}, matmul-bias {}, gemm-scale {}, gemm-activation {}, "
             "skip-layernorm {}; transposes sunk {}",
             folded.removed, bn.removed, ident.removed, dead.removed, conv.removed, gelu.removed, layernorm.removed,
             attention.removed, qkv.removed, linear.removed, scale.removed, act.removed, skip_ln.removed, sunk.removed);
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  return g->infer_shapes();
}

Status run_session_passes(Graph* g, const Device& device, std::string_view precision, bool optimize) {
  const FusionSwitches sw = FusionSwitches::from_env();
  // int8: the model's QuantizeLinear/DequantizeLinear pairs carry the quantization (gpuopt
  // quantize writes them, docs/quantization.md); the float rest runs in fp16 on the GPU and f32
  // on the CPU reference, which keeps exact ONNX QDQ semantics.
  const bool int8_gpu = precision == "int8" && device.is_cuda() && optimize && sw.enabled("qdq");
  if (precision == "int8") {
    const bool qdq = std::any_of(g->nodes().begin(), g->nodes().end(),
                                 [](const Node& n) { return n.op == Op::QuantizeLinear || n.op == Op::DequantizeLinear; });
    if (!qdq)
      return Status::InvalidArgument("precision {}: the model has no QuantizeLinear/DequantizeLinear nodes; quantize it "
                                     "first (gpuopt quantize MODEL --calibration DATA -o OUT.onnx)", precision);
    // On the GPU, QDQ pairs around MatMul/Gemm become int8 tensor-core GEMMs (before constant
    // folding turns the weights' DequantizeLinear into float constants).
    if (device.is_cuda() && optimize && sw.enabled("qdq")) {
      GPUOPT_RETURN_IF_ERROR(sw.validate());
      // Int8Conv only where the layout pass will make it channels-last (its CUDA kernel's form).
      const bool convs = env_get("GPUOPT_INT8_CONV").value_or("1") != "0" && sw.enabled("nhwc");
      if (sw.enabled("qdq_pool")) {  // MaxPool(DQ(Q(x))) -> DQ(Q(MaxPool(x))), exact (qdq_pool.cpp)
        GPUOPT_ASSIGN_OR_RETURN(PassStats qp, pool_before_qdq(g));
        GPUOPT_LOG(debug, "passes: {} MaxPools pool before their quantize round trip", qp.rewritten);
      }
      if (sw.enabled("qdq_requant")) {  // Q(DQ(q)) with one scale and zero point -> q, exact (qdq_requant.cpp)
        GPUOPT_ASSIGN_OR_RETURN(PassStats rq, drop_requantize(g));
        GPUOPT_LOG(debug, "passes: {} re-quantizes to the same scale dropped", rq.rewritten);
      }
      GPUOPT_ASSIGN_OR_RETURN(PassStats q, fold_qdq(g, convs));
      GPUOPT_LOG(debug, "passes: fold_qdq made {} int8 GEMMs/convs", q.rewritten);
    }
    if (device.is_cuda() && optimize && sw.enabled("qdq_attention")) {
      GPUOPT_ASSIGN_OR_RETURN(PassStats qa, qdq_attention_in_float(g));
      GPUOPT_LOG(debug, "passes: {} activation x activation MatMuls read their inputs in float", qa.rewritten);
    }
    precision = device.is_cuda() ? "fp16" : "fp32";
  }
  if (precision == "fp8") {  // Fp8Gemm nodes (passes/fp8.h) carry it; the float rest as int8's
    if (std::none_of(g->nodes().begin(), g->nodes().end(), [](const Node& n) { return n.op == Op::Fp8Gemm; }))
      return Status::InvalidArgument("precision fp8: the graph has no Fp8Gemm nodes; gpuopt run --precision fp8 "
                                     "calibrates a float model and writes them (docs/quantization.md)");
    precision = device.is_cuda() ? "fp16" : "fp32";
  }
  if (optimize) GPUOPT_RETURN_IF_ERROR(run_default_passes(g, sw));
  // After the fusions (Gelu and SkipLayerNormalization written), before the precision pass.
  if (int8_gpu && sw.enabled("int8_epilogue")) {
    GPUOPT_ASSIGN_OR_RETURN(PassStats ep, fuse_int8_epilogue(g));
    GPUOPT_LOG(debug, "passes: {} Int8Gemms took {} following nodes into their epilogue", ep.rewritten, ep.removed);
  }
  if (int8_gpu && sw.enabled("int8_norm")) {
    GPUOPT_ASSIGN_OR_RETURN(PassStats nq, fuse_int8_norm(g));
    GPUOPT_LOG(debug, "passes: {} SkipLayerNormalizations write the int8 tensor their QuantizeLinear made", nq.rewritten);
  }
  const bool low = precision == "fp16" || precision == "bf16";
  if (low) {
    GPUOPT_RETURN_IF_ERROR(convert_precision(g, precision == "fp16" ? DType::F16 : DType::BF16).status());
  } else if (precision != "fp32") {
    return Status::InvalidArgument("precision '{}' is not one of fp32, fp16, bf16, int8, fp8", precision);
  }
  // The attention masks cuDNN's SDPA reads expanded over the query rows once, not per call.
  if (optimize && device.is_cuda() && sw.enabled("attention") && sw.enabled("attention_mask")) {
    GPUOPT_ASSIGN_OR_RETURN(PassStats masks, expand_attention_masks(g));
    GPUOPT_LOG(debug, "passes: {} attention masks expanded once for all their readers", masks.rewritten);
  }
  // cuDNN's tensor-core convolutions are channels-last; NCHW ones transpose inside every call.
  if (optimize && low && device.is_cuda() && sw.enabled("nhwc")) {
    GPUOPT_ASSIGN_OR_RETURN(PassStats nhwc, layout_nhwc(g));
    GPUOPT_LOG(debug, "passes: layout_nhwc made {} nodes channels-last, added {} transposes", nhwc.rewritten,
               nhwc.added);
    if (sw.enabled("nhwc_entry")) {  // Cast + entry Transpose (+ the stem's channel padding) as one pass
      GPUOPT_ASSIGN_OR_RETURN(PassStats entries, pack_nhwc_entries(g));
      GPUOPT_LOG(debug, "passes: nhwc_entry made {} region entries one ToNhwc", entries.rewritten);
    }
    if (sw.enabled("se_mean")) {  // squeeze-excitation means into the depthwise convs (se_mean.h)
      GPUOPT_ASSIGN_OR_RETURN(PassStats se, fuse_se_mean(g));
      GPUOPT_LOG(debug, "passes: se_mean moved {} spatial means into depthwise convs", se.rewritten);
    }
    if (sw.enabled("dw_prologue")) {  // SiLU/HardSwish into the depthwise conv's loads (fuse_dw_prologue.h)
      GPUOPT_ASSIGN_OR_RETURN(PassStats dp, fuse_dw_prologue(g));
      GPUOPT_LOG(debug, "passes: dw_prologue moved {} activations into depthwise convs", dp.rewritten);
    }
  }
  // Int8Conv -> Int8Add pairs (fold_qdq's, now in one layout) as one residual Int8Conv. On a
  // compute capability 9.0 GPU a 1x1 one runs as one CUTLASS GEMM with the add inside
  // (ops/quant/cuda/int8_conv1x1.h: ResNet-50 int8 b256 5.85 -> 5.17 ms); every other residual
  // node runs as the pair did, unless GPUOPT_INT8_CONV1X1=0 asks for cuDNN's residual graphs
  // (slower: 7.61 against 6.67 ms at 4a0272c). GPUOPT_DISABLE_FUSION=int8_residual turns it off.
  if (optimize && device.is_cuda() && sw.enabled("int8_residual") &&
      std::any_of(g->nodes().begin(), g->nodes().end(), [](const Node& n) { return n.op == Op::Int8Add; })) {
    GPUOPT_ASSIGN_OR_RETURN(PassStats res, fuse_int8_residual(g));
    GPUOPT_LOG(debug, "passes: fuse_int8_residual took {} residual adds into their convs", res.rewritten);
  }
  return Status::Ok();
}

}  // namespace gpuopt
