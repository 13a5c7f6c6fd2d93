// ONNX Runtime's contrib ops read as standard ONNX nodes, as the model is imported.
//
// ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer) writes com.microsoft
// ops that have an exact standard form: Attention / MultiHeadAttention (contrib_attention.cpp:
// MatMul + Add + Split for the packed projection, ONNX Attention with q_num_heads/kv_num_heads,
// the mask made additive as ONNX Runtime applies it), RotaryEmbedding (ONNX's RotaryEmbedding;
// the inputs reordered, a [1] position offset made [batch, seq] positions), Gelu, FastGelu (Gelu
// with approximate="tanh", bias added first), BiasGelu (Add + Gelu) and EmbedLayerNormalization
// (Gathers + Add + LayerNormalization; its mask index a count of ones), (Skip)SimplifiedLayerNormalization
// (RMSNormalization). The fusion passes and the
// CUDA kernels then take them as they take the exporters' graphs. Op names are global in gpuopt's
// IR, so a contrib op never becomes an IR node of its own: it is rewritten here, with the shapes
// of its inputs already inferred (a packed or a 4-D form is told apart by rank).
#include "onnx/contrib_emit.h"

#include "ir/eval.h"
#include "onnx/onnx.pb.h"

#include <unordered_map>
#include <unordered_set>

namespace gpuopt::onnx_detail {

bool is_expanded_contrib_op(const std::string& domain, const std::string& op) {
  // ONNX Runtime registers SimplifiedLayerNormalization (RMS normalisation) in the default domain.
  if ((domain.empty() || domain == "ai.onnx") && op == "SimplifiedLayerNormalization") return true;
  if (domain != "com.microsoft") return false;
  return op == "Attention" || op == "MultiHeadAttention" || op == "RotaryEmbedding" || op == "Gelu" ||
         op == "FastGelu" || op == "BiasGelu" || op == "EmbedLayerNormalization" ||
         op == "SkipSimplifiedLayerNormalization";
}

bool has_expanded_contrib_ops(const onnx::GraphProto& gp) {
  for (const auto& n : gp.node())
    if (is_expanded_contrib_op(n.domain(), n.op_type())) return true;
  return false;
}

std::vector<int> proto_node_order(const onnx::GraphProto& gp) {
  const int n = gp.node_size();
  std::unordered_map<std::string, int> producer;
  for (int k = 0; k < n; ++k)
    for (const std::string& o : gp.node(k).output())
      if (!o.empty()) producer.emplace(o, k);
  std::vector<int> missing(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> dependents(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    std::unordered_set<int> seen;
    for (const std::string& in : gp.node(k).input()) {
      auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end() || it->second == k || !seen.insert(it->second).second) continue;
      ++missing[static_cast<size_t>(k)];
      dependents[static_cast<size_t>(it->second)].push_back(k);
    }
  }
  std::vector<int> order, ready;
  for (int k = n - 1; k >= 0; --k)
    if (missing[static_cast<size_t>(k)] == 0) ready.push_back(k);
  std::vector<bool> placed(static_cast<size_t>(n), false);
  while (!ready.empty()) {
    const int k = ready.back();
    ready.pop_back();
    order.push_back(k);
    placed[static_cast<size_t>(k)] = true;
    const auto& deps = dependents[static_cast<size_t>(k)];
    for (auto d = deps.rbegin(); d != deps.rend(); ++d)
      if (--missing[static_cast<size_t>(*d)] == 0) ready.push_back(*d);
  }
  for (int k = 0; k < n; ++k)
    if (!placed[static_cast<size_t>(k)]) order.push_back(k);  // a cycle: reported when its inputs are read
  return order;
}

Status infer_added_node(Graph& g, size_t index) {
  const Node& node = g.nodes()[index];
  std::vector<ValueInfo> infos(node.inputs.size());
  std::vector<const ValueInfo*> ptrs(node.inputs.size(), nullptr);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    infos[i] = g.info_with_value(node.inputs[i]);
    ptrs[i] = &infos[i];
  }
  while (!ptrs.empty() && ptrs.back() == nullptr) ptrs.pop_back();
  GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> outs, infer_node(node, ptrs, g.opset_for(node)));
  const std::vector<ValueId> ids = g.nodes()[index].outputs;
  for (size_t i = 0; i < ids.size() && i < outs.size(); ++i) {
    if (ids[i] == kNoValue) continue;
    outs[i].value = nullptr;
    g.value(ids[i]).info = std::move(outs[i]);
  }
  return Status::Ok();
}

Result<std::vector<ValueId>> Emitter::op_n(Op op, std::vector<ValueId> ins, size_t num_out, AttributeMap attrs,
                                           std::vector<std::string> out_names) {
  const std::string name = fmt::format("{}/{}_{}", n_.name, op_name(op), counter_++);
  std::vector<ValueId> outs = g_.add_node(op, name, std::move(ins), num_out, std::move(attrs), std::move(out_names));
  const size_t index = g_.nodes().size() - 1;
  GPUOPT_RETURN_IF_ERROR(node_version(g_.nodes()[index], g_.opset_for(g_.nodes()[index])).status());
  Status st = infer_added_node(g_, index);
  if (!st.ok()) return st.with_context(fmt::format("reading {} {} node '{}'", domain_label(), n_.op_type, n_.name));
  return outs;
}

Status Emitter::only_output0(const char* others) const {
  if (!wants_out(0)) return error("its output 0 is not used");
  for (size_t i = 1; i < n_.outputs.size(); ++i)
    if (wants_out(i)) return unsupported("output {} ({}) is not supported", i, others);
  return Status::Ok();
}

namespace {

// Gelu (exact), FastGelu (tanh approximation, optional bias) and BiasGelu (A + B, exact).
Result<std::vector<ValueId>> expand_gelu(Emitter& e, const std::string& op) {
  GPUOPT_RETURN_IF_ERROR(e.only_output0("none"));
  if (!e.has_in(0)) return e.error("input 0 is missing");
  ValueId x = e.in(0);
  if (op == "BiasGelu" && !e.has_in(1)) return e.error("BiasGelu needs its bias input B");
  if ((op == "BiasGelu" || op == "FastGelu") && e.has_in(1)) {
    GPUOPT_ASSIGN_OR_RETURN(x, e.op(Op::Add, {x, e.in(1)}));
  }
  AttributeMap attrs;
  if (op == "FastGelu") attrs["approximate"] = string_attr("tanh");
  GPUOPT_ASSIGN_OR_RETURN(ValueId y, e.op(Op::Gelu, {x}, std::move(attrs), e.node().outputs[0]));
  return std::vector<ValueId>{y};
}

// com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache) -> ONNX RotaryEmbedding
// (X, cos_cache, sin_cache, position_ids [batch, seq]).
Result<std::vector<ValueId>> expand_rotary(Emitter& e) {
  GPUOPT_RETURN_IF_ERROR(e.only_output0("none"));
  for (size_t i = 0; i < 4; ++i)
    if (!e.has_in(i)) return e.error("input {} is missing (input, position_ids, cos_cache, sin_cache are required)", i);
  if (e.attr_i("is_packed_batching", 0) != 0) return e.unsupported("is_packed_batching=1 is not supported");
  const ValueId x = e.in(0), pos = e.in(1), cos = e.in(2), sin = e.in(3);
  const int64_t xr = e.rank(x), pr = e.rank(pos);
  if (xr != 3 && xr != 4) return e.error("input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head]");
  int64_t num_heads = e.attr_i("num_heads", 0);
  const int64_t rot = e.attr_i("rotary_embedding_dim", 0);
  if (xr == 3 && num_heads <= 0) {
    // ONNX Runtime takes the head size from the cache then: [max_pos, head_size / 2].
    const ValueInfo xi = e.info(x), ci = e.info(cos);
    const int64_t hidden = e.dim(x, 2), half = e.rank(cos) == 2 ? e.dim(cos, 1) : kUnknownDim;
    if (rot != 0 || !dim_is_known(hidden) || !dim_is_known(half) || half == 0 || hidden % (2 * half) != 0)
      return e.error("a 3-D input without num_heads needs known hidden and cos_cache sizes (hidden {}, cache {})",
                     e.graph().shape_string(xi.shape), ci.rank_known ? e.graph().shape_string(ci.shape) : "?");
    num_heads = hidden / (2 * half);
  }
  ValueId p = pos;
  if (pr == 1) {
    // [1]: the position of the first token; token s is at offset + s in every batch row.
    GPUOPT_ASSIGN_OR_RETURN(ValueId seq, e.dim_scalar(x, -2));
    GPUOPT_ASSIGN_OR_RETURN(ValueId off, e.reshape(pos, {}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId lim, e.op(Op::Add, {off, seq}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId range, e.op(Op::Range, {off, lim, e.i64_scalar(1)}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId row, e.reshape(range, {1, -1}));
    // [1, S] + zeros [B, 1] (Add runs on CUDA for i64, Expand does not).
    GPUOPT_ASSIGN_OR_RETURN(ValueId shape, e.op(Op::Shape, {x}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId b, e.op(Op::Gather, {shape, e.i64s({0})}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId b1, e.op(Op::Concat, {b, e.i64s({1})}, {{"axis", int_attr(0)}}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId zeros, e.op(Op::ConstantOfShape, {b1}, {{"value", Emitter::tensor_attr(Emitter::i64_tensor(0))}}));
    GPUOPT_ASSIGN_OR_RETURN(p, e.op(Op::Add, {row, zeros}));
  } else if (pr != 2) {
    return e.error("position_ids must be 1-D [1] (an offset) or 2-D [batch, seq]");
  }
  AttributeMap attrs;
  attrs["interleaved"] = int_attr(e.attr_i("interleaved", 0));
  if (num_heads > 0) attrs["num_heads"] = int_attr(num_heads);
  if (rot > 0) attrs["rotary_embedding_dim"] = int_attr(rot);
  GPUOPT_ASSIGN_OR_RETURN(ValueId y, e.op(Op::RotaryEmbedding, {x, cos, sin, p}, std::move(attrs), e.node().outputs[0]));
  return std::vector<ValueId>{y};
}

// EmbedLayerNormalization (BERT's embeddings, what ONNX Runtime's optimizer writes by default):
//   sum = word_embedding[input_ids] + position_embedding[position_ids or 0..S) (+ segment_embedding[segment_ids])
//   output = LayerNormalization(sum, gamma, beta, epsilon); embedding_sum = sum;
//   mask_index[b] = the number of mask entries equal to 1 in row b (zeros without a mask), int32;
//   counted by a float ReduceSum (the CUDA one), exact to 2048 tokens at fp16 (BERT has 512).
Result<std::vector<ValueId>> expand_embed_layernorm(Emitter& e) {
  if (!e.wants_out(0)) return e.error("its output 0 is not used");
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}, size_t{5}, size_t{6}})
    if (!e.has_in(i)) return e.error("input {} is missing (input_ids, word_embedding, position_embedding, gamma and beta are required)", i);
  if (e.has_in(1) != e.has_in(4)) return e.error("segment_ids and segment_embedding must be given together");
  const ValueId ids = e.in(0);
  if (e.rank(ids) != 2) return e.error("input_ids must be 2-D [batch, seq]");
  GPUOPT_ASSIGN_OR_RETURN(ValueId sum, e.op(Op::Gather, {e.in(2), ids}));
  ValueId pos_ids = e.in(8);
  if (pos_ids == kNoValue) {
    GPUOPT_ASSIGN_OR_RETURN(ValueId seq, e.dim_scalar(ids, 1));
    GPUOPT_ASSIGN_OR_RETURN(pos_ids, e.op(Op::Range, {e.i64_scalar(0), seq, e.i64_scalar(1)}));
  }
  GPUOPT_ASSIGN_OR_RETURN(ValueId pos, e.op(Op::Gather, {e.in(3), pos_ids}));
  GPUOPT_ASSIGN_OR_RETURN(sum, e.op(Op::Add, {sum, pos}));
  if (e.has_in(1)) {
    GPUOPT_ASSIGN_OR_RETURN(ValueId seg, e.op(Op::Gather, {e.in(4), e.in(1)}));
    GPUOPT_ASSIGN_OR_RETURN(sum, e.op(Op::Add, {sum, seg}));
  }
  const auto& outs = e.node().outputs;
  std::vector<ValueId> result(outs.size(), kNoValue);
  GPUOPT_ASSIGN_OR_RETURN(result[0], e.op(Op::LayerNormalization, {sum, e.in(5), e.in(6)},
                                          {{"axis", int_attr(-1)}, {"epsilon", float_attr(e.attr_f("epsilon", 1e-12f))}},
                                          outs[0]));
  if (e.wants_out(1)) {
    ValueId count;
    if (e.has_in(7)) {
      GPUOPT_ASSIGN_OR_RETURN(ValueId one, e.op(Op::Equal, {e.in(7), e.constant(Tensor::from_vector(
                                                                           e.info(e.in(7)).dtype, {}, std::vector<int64_t>{1}))}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId onef, e.op(Op::Cast, {one}, {{"to", int_attr(1)}}));
      GPUOPT_ASSIGN_OR_RETURN(count, e.reduce_sum(onef, {1}, false));
    } else {
      GPUOPT_ASSIGN_OR_RETURN(ValueId shape, e.op(Op::Shape, {ids}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId b, e.op(Op::Gather, {shape, e.i64s({0})}));
      GPUOPT_ASSIGN_OR_RETURN(count, e.op(Op::ConstantOfShape, {b}));
    }
    GPUOPT_ASSIGN_OR_RETURN(result[1], e.op(Op::Cast, {count}, {{"to", int_attr(6)}}, outs[1]));  // INT32
  }
  if (e.wants_out(2)) {
    GPUOPT_ASSIGN_OR_RETURN(result[2], e.op(Op::Identity, {sum}, {}, outs[2]));
  }
  return result;
}

// SimplifiedLayerNormalization (X, scale; axis, epsilon) -> ONNX RMSNormalization; and
// SkipSimplifiedLayerNormalization (input, skip, gamma, bias) -> Add (+ Add) + RMSNormalization
// over the last axis, its input_skip_bias_sum (output 3) the sum. What ONNX Runtime's optimizer
// writes for T5, LLaMA and Phi. The statistics outputs (mean, inv_std_var) are refused.
Result<std::vector<ValueId>> expand_simplified_layernorm(Emitter& e, bool skip) {
  const auto& outs = e.node().outputs;
  if (!e.wants_out(0)) return e.error("its output 0 is not used");
  for (size_t i = 1; i < outs.size(); ++i)
    if (e.wants_out(i) && !(skip && i == 3))
      return e.unsupported("output {} (a normalisation statistic) is not supported", i);
  const size_t need = skip ? 3 : 2;
  for (size_t i = 0; i < need; ++i)
    if (!e.has_in(i)) return e.error("input {} is missing", i);
  ValueId x = e.in(0);
  if (skip) {
    GPUOPT_ASSIGN_OR_RETURN(x, e.op(Op::Add, {x, e.in(1)}));
    if (e.has_in(3)) {
      GPUOPT_ASSIGN_OR_RETURN(x, e.op(Op::Add, {x, e.in(3)}));
    }
  }
  const ValueId scale = e.in(skip ? 2 : 1);
  AttributeMap attrs{{"axis", int_attr(skip ? -1 : e.attr_i("axis", -1))},
                     {"epsilon", float_attr(e.attr_f("epsilon", skip ? 1e-12f : 1e-5f))}};
  std::vector<ValueId> result(outs.size(), kNoValue);
  GPUOPT_ASSIGN_OR_RETURN(result[0], e.op(Op::RMSNormalization, {x, scale}, std::move(attrs), outs[0]));
  if (skip && e.wants_out(3)) {
    GPUOPT_ASSIGN_OR_RETURN(result[3], e.op(Op::Identity, {x}, {}, outs[3]));
  }
  return result;
}

}  // namespace

Result<std::vector<ValueId>> expand_contrib_node(Graph& g, const ContribNode& n) {
  Emitter e(g, n);
  Result<std::vector<ValueId>> r = [&]() -> Result<std::vector<ValueId>> {
    if (n.op_type == "Attention") return expand_contrib_attention(e);
    if (n.op_type == "MultiHeadAttention") return expand_contrib_mha(e);
    if (n.op_type == "RotaryEmbedding") return expand_rotary(e);
    if (n.op_type == "EmbedLayerNormalization") return expand_embed_layernorm(e);
    if (n.op_type == "SimplifiedLayerNormalization") return expand_simplified_layernorm(e, false);
    if (n.op_type == "SkipSimplifiedLayerNormalization") return expand_simplified_layernorm(e, true);
    return expand_gelu(e, n.op_type);
  }();
  if (!r.ok()) return r.status();
  std::vector<ValueId> outs = std::move(*r);
  outs.resize(n.outputs.size(), kNoValue);
  return outs;
}

}  // namespace gpuopt::onnx_detail
