// expand_attention_masks (merge_qkv.h): a [B, 1, 1, S] additive mask that several Attention nodes
// read (BERT's padding mask, built once by the CSE pass and read by every layer) is expanded to
// [B, 1, q_seq, S] once, by one Expand node, instead of inside every attention call: cuDNN's SDPA
// wants its bias over the query rows, and the CUDA Attention copied the mask to that layout before
// each call (12 launches per BERT-base run); a mask already in that layout is read in place
// (ops/transformer/cuda/sdpa.cpp). Exact: the Attention broadcasts the mask over the query rows
// either way. Run for CUDA sessions after fuse_attention; GPUOPT_DISABLE_FUSION=attention_mask.
#include "passes/match.h"
#include "passes/merge_qkv.h"

#include <map>

namespace gpuopt {
namespace {

// The query sequence dim of an Attention node's input 0: [B, S, W] (3-D and packed forms) or
// [B, H, S, D].
int64_t q_seq_axis(const Graph& g, const Node& n) {
  const ValueInfo& q = g.value(n.inputs[0]).info;
  if (!q.rank_known) return -1;
  if (q.shape.size() == 3 && n.attr_i("q_num_heads", 0) > 0) return 1;
  return q.shape.size() == 4 ? 2 : -1;
}

}  // namespace

Result<PassStats> expand_attention_masks(Graph* g) {
  PassStats stats;
  const auto expand = op_from_name("Expand"), shape = op_from_name("Shape"), gather = op_from_name("Gather"),
             concat = op_from_name("Concat");
  if (!expand || !shape || !gather || !concat) return stats;
  g->rebuild_producers();
  const auto consumers = g->consumers();
  // Mask value -> the Attention nodes reading it as attn_mask.
  std::map<ValueId, std::vector<int32_t>> readers;
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Node& n = g->nodes()[i];
    if (is_default(n, "Attention") && n.inputs.size() > 3 && n.inputs[3] != kNoValue && n.inputs[0] != kNoValue)
      readers[n.inputs[3]].push_back(static_cast<int32_t>(i));
  }
  for (const auto& [m, atts] : readers) {
    const ValueInfo& mi = g->value(m).info;
    if (atts.size() < 2 || consumers[static_cast<size_t>(m)].size() != atts.size() || !dtype_is_float(mi.dtype) ||
        !mi.rank_known || mi.shape.size() != 4 || mi.shape[1] != 1 || mi.shape[2] != 1)
      continue;
    // Every reader's query length is one dim (a constant or the same symbol).
    const Node& first = g->nodes()[static_cast<size_t>(atts[0])];
    const int64_t axis = q_seq_axis(*g, first);
    if (axis < 0) continue;
    const int64_t seq = g->value(first.inputs[0]).info.shape[static_cast<size_t>(axis)];
    bool same = seq != kUnknownDim;
    for (int32_t ai : atts) {
      const Node& n = g->nodes()[static_cast<size_t>(ai)];
      const int64_t ax = q_seq_axis(*g, n);
      same = same && ax >= 0 && g->value(n.inputs[0]).info.shape[static_cast<size_t>(ax)] == seq &&
             n.inputs[3] == m;
    }
    if (!same) continue;
    // Target [1, 1, q_seq, 1]: q_seq taken from the first reader's Q at run time (shape math).
    const std::string base = g->value(m).name + "/per_query";
    const ValueId q = first.inputs[0];
    ValueId seq_dim;
    if (dim_is_known(seq)) {
      seq_dim = g->add_constant(base + "/q_seq", Tensor::from_vector<int64_t>(DType::I64, {1}, {seq}));
    } else {
      const ValueId s = g->add_node(*shape, base + "/q_shape", {q}, 1)[0];
      const ValueId idx = g->add_constant(base + "/q_axis", Tensor::from_vector<int64_t>(DType::I64, {1}, {axis}));
      seq_dim = g->add_node(*gather, base + "/q_seq", {s, idx}, 1, {{"axis", int_attr(0)}})[0];
    }
    const ValueId ones = g->add_constant(base + "/ones", Tensor::from_vector<int64_t>(DType::I64, {2}, {1, 1}));
    const ValueId one = g->add_constant(base + "/one", Tensor::from_vector<int64_t>(DType::I64, {1}, {1}));
    const ValueId target = g->add_node(*concat, base + "/target", {ones, seq_dim, one}, 1, {{"axis", int_attr(0)}})[0];
    const ValueId wide = g->add_node(*expand, base, {m, target}, 1)[0];
    for (int32_t ai : atts) g->nodes()[static_cast<size_t>(ai)].inputs[3] = wide;
    ++stats.rewritten;
    stats.added += 1;
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
