// gpuopt run --precision fp8 on a float model (fp8.h).
#include "quant/fp8.h"

#include "passes/fp8.h"
#include "passes/passes.h"
#include "quant/quantizer.h"

#include <algorithm>

namespace gpuopt::quant {

Result<Fp8Model> fp8_on_graph(Graph g, const NamedTensors& feeds, const Device& device) {
  // The fusions first (MatMul + bias -> Gemm, Gemm + Relu/Gelu -> FusedGemm), so the bias and
  // Relu ride the FP8 GEMM's epilogue; the calibrated names are those of this graph.
  FusionSwitches sw = FusionSwitches::from_env();
  // Q, K and V stay three GEMMs, each with its own per-tensor e4m3 weight scale (one merged
  // weight would quantize all three with the largest one's).
  sw.off.emplace_back("merge_qkv");
  GPUOPT_RETURN_IF_ERROR(run_default_passes(&g, sw));
  // Once more after the fusions: each MatMul + bias fusion flattens its input with a Reshape of
  // its own, so Q, K and V would read three equal copies and none could share one e4m3 A.
  GPUOPT_RETURN_IF_ERROR(eliminate_common_subexpressions(&g).status());
  GPUOPT_RETURN_IF_ERROR(remove_dead_nodes(&g).status());
  GPUOPT_RETURN_IF_ERROR(g.topo_sort());
  GPUOPT_RETURN_IF_ERROR(g.infer_shapes());
  Sample s{{}, "the run's inputs"};
  for (ValueId in : g.inputs()) {
    const std::string& name = g.value(in).name;
    auto it = std::find_if(feeds.begin(), feeds.end(), [&](const auto& f) { return f.first == name; });
    if (it == feeds.end()) return Status::InvalidArgument("missing input '{}'", name);
    s.inputs.push_back(it->second);
  }
  const std::vector<std::string> names = fp8_activation_tensors(g);
  QuantizeOptions o;
  o.device = device;
  GPUOPT_ASSIGN_OR_RETURN(auto hist, collect_histograms(g, names, {s}, o));
  std::map<std::string, double> amax;
  for (const auto& [name, h] : hist)
    if (h.total() > 0) amax[name] = h.max_abs();  // minmax: no value of this run saturates
  GPUOPT_ASSIGN_OR_RETURN(Fp8Stats st, rewrite_fp8(&g, amax, sw.enabled("fp8_chain"), sw.enabled("fp8_norm"),
                                                    sw.enabled("fp8_lone") ? kFp8LoneMinN : 0));
  return Fp8Model{std::move(g), st.rewritten, st.chained, st.shared, std::move(st.kept), st.normed};
}

}  // namespace gpuopt::quant
