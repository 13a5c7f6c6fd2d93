// plan_channels_last() (fast_kernel.h): which activations the fast CPU backend stores NHWC.
// A value qualifies when a channels-last-capable kernel (a oneDNN convolution) writes it as its
// output 0 and every reader is such a kernel reading it as input 0 (the image) or 3 (the
// residual): then no conversion runs between them. A graph output, or a value any other node
// reads (a pool, a Reshape, a subgraph's capture), stays NCHW: its convolution converts.
#include "backends/cpu_fast/fast_kernel.h"

namespace gpuopt::cpu_fast {

void plan_channels_last(const Graph& graph, const std::vector<std::unique_ptr<FastKernel>>& kernels) {
  const auto& nodes = graph.nodes();
  auto capable = [&](size_t n) { return n < kernels.size() && kernels[n] && kernels[n]->channels_last_capable(); };
  std::vector<bool> nhwc(graph.values().size(), false);
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!capable(n) || nodes[n].outputs.empty() || nodes[n].outputs[0] == kNoValue) continue;
    const ValueId v = nodes[n].outputs[0];
    const Value& val = graph.value(v);
    if (val.is_graph_output || !val.info.rank_known || val.info.shape.size() != 4) continue;
    nhwc[static_cast<size_t>(v)] = true;
  }
  // Any reader that is not a capable kernel's input 0 or 3 keeps the value NCHW.
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t i = 0; i < nodes[n].inputs.size(); ++i) {
      const ValueId v = nodes[n].inputs[i];
      if (v == kNoValue) continue;
      if (!capable(n) || (i != 0 && i != 3)) nhwc[static_cast<size_t>(v)] = false;
    }
  auto is = [&](const Node& node, size_t i) {
    return i < node.inputs.size() && node.inputs[i] != kNoValue && nhwc[static_cast<size_t>(node.inputs[i])];
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!capable(n)) continue;
    const Node& node = nodes[n];
    const bool y = !node.outputs.empty() && node.outputs[0] != kNoValue && nhwc[static_cast<size_t>(node.outputs[0])];
    kernels[n]->set_channels_last(is(node, 0), is(node, 3), y);
  }
}

}  // namespace gpuopt::cpu_fast
