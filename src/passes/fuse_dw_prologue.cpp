// fuse_dw_prologue (fuse_dw_prologue.h). In an MBConv block (EfficientNet, MobileNetV3) the expand
// 1x1 conv's SiLU or HardSwish output feeds only the depthwise conv. cuDNN's fused call has no
// such activation and cuBLASLt's epilogues neither, so the expand conv ran as a plain conv plus
// one epilogue pass of ours that read and wrote the block's widest activation once more (at batch
// 256 on the H200, 33 such passes were 3.2 ms of EfficientNet-B0's 10.5, docs/perf-notes.md). The
// depthwise kernel reads every input value into registers anyway: it applies the activation there.
#include "passes/fuse_dw_prologue.h"

#include "ops/conv/conv_activation.h"
#include "passes/match.h"

#include <algorithm>

namespace gpuopt {
namespace {

bool nhwc_conv(const Node& n) {
  return n.domain == "ai.gpuopt" && n.op_type == "NhwcFusedConv";
}

// n is a channels-last depthwise conv that the CUDA depthwise kernel takes (the prologue is its).
bool depthwise(const Graph& g, const Node& n) {
  if (!nhwc_conv(n) || n.inputs.size() < 2 || n.inputs[0] == kNoValue || n.inputs[1] == kNoValue) return false;
  const ValueInfo& x = g.value(n.inputs[0]).info;
  const ValueInfo& w = g.value(n.inputs[1]).info;
  if (!x.rank_known || !w.rank_known || x.shape.size() != 4 || w.shape.size() != 4) return false;
  if (x.dtype != DType::F16 && x.dtype != DType::BF16) return false;
  const int64_t c = x.shape[3], group = n.attr_i("group", 1);
  return c > 1 && group == c && w.shape[0] == c && w.shape[3] == 1;  // [M, kH, kW, C/group]
}

}  // namespace

Result<PassStats> fuse_dw_prologue(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  const auto consumers = g->consumers();
  for (Node& p : g->nodes()) {
    if (!nhwc_conv(p) || p.outputs.size() != 1) continue;  // a second output (the mean) reads the activated Y
    const std::optional<ConvAct> act = conv_act_from_name(p.attr_s("activation", ""));
    if (!act || (*act != ConvAct::kSwish && *act != ConvAct::kHardSwish)) continue;
    const ValueId y = p.outputs[0];
    if (g->value(y).is_graph_output) continue;
    const auto& readers = consumers[static_cast<size_t>(y)];
    if (readers.empty() || std::any_of(readers.begin(), readers.end(), [&](int32_t r) { return r != readers[0]; }))
      continue;
    Node& d = g->nodes()[static_cast<size_t>(readers[0])];
    if (&d == &p || !depthwise(*g, d) || !d.attr_s(kConvInputActivation, "").empty()) continue;
    // Y is D's X and nothing else (not its weights, bias or z).
    bool only_x = d.inputs[0] == y;
    for (size_t i = 1; i < d.inputs.size(); ++i) only_x = only_x && d.inputs[i] != y;
    if (!only_x) continue;
    d.attrs[std::string(kConvInputActivation)] = string_attr(std::string(conv_act_name(*act)));
    p.attrs.erase(std::string("activation"));
    ++stats.rewritten;
  }
  return stats;
}

}  // namespace gpuopt
