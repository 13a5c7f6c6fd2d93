// fuse_se_mean (se_mean.h). EfficientNet's and MobileNetV3's squeeze-excitation blocks read the
// depthwise conv's whole output once more for their mean (AdaptiveAvgPool2d(1): GlobalAveragePool
// in the legacy export, ReduceMean over [-1, -2] in the dynamo one; layout_nhwc writes both as
// ReduceMean over NHWC axes [1, 2]): at batch 256 on the H200, 17 such means were 1.4 ms of
// EfficientNet-B0's 11 (docs/perf-notes.md). The depthwise kernel has each output in registers
// when it stores it, so it sums them too (ops/conv/cuda/depthwise_mean.cu).
#include "passes/se_mean.h"

#include "passes/match.h"

namespace gpuopt {
namespace {

// n is a channels-last depthwise conv with one output that the kernel of ours takes.
bool depthwise_nhwc(const Graph& g, const Node& n) {
  if (n.domain != "ai.gpuopt" || n.op_type != "NhwcFusedConv" || n.outputs.size() != 1 || n.inputs.size() < 2)
    return false;
  const ValueInfo& x = g.value(n.inputs[0]).info;
  const ValueInfo& w = g.value(n.inputs[1]).info;
  const ValueInfo& y = g.value(n.outputs[0]).info;
  if (!x.rank_known || !w.rank_known || !y.rank_known || x.shape.size() != 4 || w.shape.size() != 4 ||
      y.shape.size() != 4)
    return false;
  if (x.dtype != DType::F16 && x.dtype != DType::BF16) return false;
  const int64_t c = x.shape[3], group = n.attr_i("group", 1);
  return c > 1 && group == c && w.shape[0] == c && w.shape[3] == 1;  // [M, kH, kW, C/group]
}

}  // namespace

Result<PassStats> fuse_se_mean(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  std::vector<bool> drop(g->nodes().size(), false);
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Node& r = g->nodes()[i];
    if (!is_default(r, "ReduceMean") || r.inputs.empty() || r.outputs.size() != 1) continue;
    if (r.attr_i("keepdims", 1) != 1 || reduce_axes(*g, r, 4) != std::vector<int64_t>{1, 2}) continue;
    const int32_t p = g->value(r.inputs[0]).producer;
    if (p < 0) continue;
    Node& conv = g->nodes()[static_cast<size_t>(p)];
    if (!depthwise_nhwc(*g, conv) || g->value(r.outputs[0]).info.dtype != g->value(conv.outputs[0]).info.dtype)
      continue;
    conv.outputs.push_back(r.outputs[0]);
    drop[i] = true;
    ++stats.rewritten;
    ++stats.removed;
  }
  if (stats.removed == 0) return stats;
  erase_nodes(g, drop);
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
