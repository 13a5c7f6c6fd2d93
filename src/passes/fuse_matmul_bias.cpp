// MatMul(X, W) -> Add(bias) with a constant 2-D W [K, N] and a constant bias [N] (a Linear layer
// as exporters write it for 3-D inputs) becomes one Gemm with the bias as C: on the GPU one
// cuBLASLt call whose epilogue adds the bias (docs/cuda.md), instead of a matmul plus an
// elementwise pass over its whole output. BERT-base has 72 such pairs.
//
// For X of rank 2 the Gemm replaces the pair. For higher ranks X is flattened to [-1, K] (a view)
// and the result reshaped back to X's leading dims plus N, with the target shape computed from
// Shape(X) (host shape arithmetic on the CUDA backend). Fused only where nothing else reads the
// MatMul output and it is not a graph output; the Add's output keeps its value (and name).
#include "passes/passes.h"

namespace gpuopt {
namespace {

bool is_default(const Node& n, std::string_view op) { return n.op_type == op && n.domain.empty(); }

const Tensor* constant_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const auto& c = g.value(v).constant;
  return c ? &*c : nullptr;
}

}  // namespace

Result<PassStats> fuse_matmul_bias(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  const auto consumers = g->consumers();
  std::vector<bool> drop(g->nodes().size(), false);
  const size_t num_nodes = g->nodes().size();
  for (size_t ai = 0; ai < num_nodes; ++ai) {
    const Node add = g->nodes()[ai];  // a copy: add_node below may move the node list
    if (drop[ai] || !is_default(add, "Add") || add.inputs.size() != 2 || add.outputs.empty()) continue;
    for (int side = 0; side < 2; ++side) {
      const ValueId mm_out = add.inputs[side], bias_v = add.inputs[1 - side];
      if (mm_out == kNoValue || g->value(mm_out).is_graph_output) continue;
      const int32_t mi = g->value(mm_out).producer;
      if (mi < 0 || drop[static_cast<size_t>(mi)] || consumers[static_cast<size_t>(mm_out)].size() != 1) continue;
      const Node mm = g->nodes()[static_cast<size_t>(mi)];
      if (!is_default(mm, "MatMul") || mm.inputs.size() != 2) continue;
      const Tensor* w = constant_of(*g, mm.inputs[1]);
      const Tensor* b = constant_of(*g, bias_v);
      const ValueInfo& xi = g->value(mm.inputs[0]).info;
      if (!w || !b || w->rank() != 2 || b->rank() != 1 || b->shape()[0] != w->shape()[1]) continue;
      if (w->dtype() != DType::F32 || b->dtype() != DType::F32 || xi.dtype != DType::F32) continue;
      if (!xi.rank_known || xi.shape.size() < 2 || (dim_is_known(xi.shape.back()) && xi.shape.back() != w->shape()[0]))
        continue;
      const int64_t k = w->shape()[0], n = w->shape()[1];
      const size_t rank = xi.shape.size();
      const std::string base = mm.name.empty() ? add.name : mm.name;
      if (rank == 2) {
        Node gemm;
        gemm.op = Op::Gemm;
        gemm.op_type = "Gemm";
        gemm.name = base;
        gemm.inputs = {mm.inputs[0], mm.inputs[1], bias_v};
        gemm.outputs = {add.outputs[0]};
        g->nodes()[ai] = std::move(gemm);
      } else {
        const ValueId flat_shape = g->add_constant(base + "/flat_shape", Tensor::from_vector<int64_t>(DType::I64, {2}, {-1, k}));
        const ValueId x2 = g->add_node(Op::Reshape, base + "/flatten", {mm.inputs[0], flat_shape}, 1)[0];
        const ValueId y2 = g->add_node(Op::Gemm, base, {x2, mm.inputs[1], bias_v}, 1)[0];
        std::vector<int64_t> lead(rank - 1);
        for (size_t i = 0; i < lead.size(); ++i) lead[i] = static_cast<int64_t>(i);
        const ValueId shp = g->add_node(Op::Shape, base + "/shape", {mm.inputs[0]}, 1)[0];
        const ValueId idx = g->add_constant(base + "/lead_axes",
                                            Tensor::from_vector<int64_t>(DType::I64, {static_cast<int64_t>(lead.size())}, lead));
        AttributeMap axis0;
        axis0["axis"].kind = Attribute::Kind::kInt;
        axis0["axis"].i = 0;
        const ValueId lead_dims = g->add_node(Op::Gather, base + "/lead_dims", {shp, idx}, 1, axis0)[0];
        const ValueId n_dim = g->add_constant(base + "/n", Tensor::from_vector<int64_t>(DType::I64, {1}, {n}));
        const ValueId target = g->add_node(Op::Concat, base + "/target", {lead_dims, n_dim}, 1, axis0)[0];
        Node back;
        back.op = Op::Reshape;
        back.op_type = "Reshape";
        back.name = base + "/unflatten";
        back.inputs = {y2, target};
        back.outputs = {add.outputs[0]};
        g->nodes()[ai] = std::move(back);
      }
      drop[static_cast<size_t>(mi)] = true;
      ++stats.removed;
      break;
    }
  }
  if (stats.removed == 0) return stats;
  drop.resize(g->nodes().size(), false);  // the nodes added above stay
  erase_nodes(g, drop);
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  return stats;
}

}  // namespace gpuopt
