#include "passes/precision.h"

#include "core/log.h"
#include "ir/eval.h"

#include <map>
#include <set>

namespace gpuopt {
namespace {

// (op, input index) pairs the ONNX spec types as float whatever T is.
bool input_must_stay_f32(std::string_view op, size_t i) {
  return (op == "Resize" && (i == 1 || i == 2)) || (op == "Upsample" && i == 1);
}

bool keep_f32(std::string_view op) {
  for (const auto& [name, why] : keep_f32_ops())
    if (name == op) return true;
  return false;
}

// bf16 runs only these in bf16 (tensor-core math, f32 accumulation): PyTorch autocast's split.
// FusedConv (Conv + residual + activation) too: as a Conv it would otherwise fall to f32 math;
// and Attention, as autocast runs scaled_dot_product_attention (the kernel's softmax is f32).
bool bf16_compute_op(std::string_view op) {
  return op == "MatMul" || op == "Gemm" || op == "FusedGemm" || op == "Conv" || op == "ConvTranspose" || op == "Einsum" ||
         op == "FusedConv" || op == "NhwcFusedConv" || op == "Attention";
}

// Data movement: exact in any type, so under bf16 it keeps whatever type its data input has
// (a Transpose between two bf16 MatMuls stays bf16 instead of costing two Casts).
bool movement_op(std::string_view op) {
  return op == "Reshape" || op == "Transpose" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity" || op == "Slice" || op == "Split" || op == "Concat" || op == "Gather" || op == "Expand" ||
         op == "Tile" || op == "DepthToSpace" || op == "SpaceToDepth" || op == "MaxPool" || op == "NhwcMaxPool";
}

}  // namespace

const std::vector<std::pair<std::string_view, std::string_view>>& keep_f32_ops() {
  static const std::vector<std::pair<std::string_view, std::string_view>> kOps = {
      {"ReduceSum", "sums over many elements exceed the f16 range (65504)"},
      {"ReduceSumSquare", "squares summed overflow f16"},
      {"ReduceL2", "sum of squares before the root overflows f16"},
      {"ReduceProd", "products overflow or underflow f16"},
      {"CumSum", "running sums grow past the f16 range"},
      {"Pow", "powers overflow f16 (x^2 of activations above 256)"},
      {"Range", "index arithmetic must be exact"},
  };
  return kOps;
}

Result<PassStats> convert_precision(Graph* g, DType low) {
  if (low != DType::F16 && low != DType::BF16)
    return Status::InvalidArgument("precision conversion targets f16 or bf16, not {}", dtype_name(low));
  const std::optional<Op> cast_op = op_from_name("Cast");
  if (!cast_op) return Status::Unimplemented("precision conversion needs the Cast op");
  PassStats stats;

  // Which nodes compute in low precision: those with an f32 input or output, unless kept; under
  // bf16 only the tensor-core ops (and movement ops fed by them, decided below in order).
  const size_t num_nodes = g->nodes().size();
  std::vector<bool> low_node(num_nodes, false);
  const bool bf16 = low == DType::BF16;
  for (size_t n = 0; n < num_nodes; ++n) {
    const Node& node = g->nodes()[n];
    if (keep_f32(node.op_type)) continue;
    if (bf16 && !bf16_compute_op(node.op_type)) continue;
    bool touches_f32 = false;
    for (ValueId v : node.inputs) touches_f32 |= v != kNoValue && g->value(v).info.dtype == DType::F32;
    for (ValueId v : node.outputs) touches_f32 |= v != kNoValue && g->value(v).info.dtype == DType::F32;
    if (node.op_type == "Cast") touches_f32 = node.attr_i("to", 0) == static_cast<int64_t>(DType::F32);
    low_node[n] = touches_f32;
  }

  // Cast(to=float) inside the low region casts to the low type instead.
  for (size_t n = 0; n < num_nodes; ++n)
    if (low_node[n] && g->nodes()[n].op_type == "Cast") g->nodes()[n].attrs["to"].i = static_cast<int64_t>(low);

  // In topological order: convert each float input to what its consumer computes in, then infer
  // the node's output types from its (converted) inputs, so ops whose output type comes from an
  // attribute (ConstantOfShape, ...) keep it and get a Cast downstream.
  std::map<std::pair<ValueId, DType>, ValueId> casts;  // (value, to) -> converted value
  auto converted = [&](ValueId v, DType to) -> ValueId {
    auto key = std::make_pair(v, to);
    if (auto it = casts.find(key); it != casts.end()) return it->second;
    const Value& src = g->value(v);
    ValueId out;
    if (src.constant) {
      Tensor t = src.constant->cast(to);
      out = g->add_constant(src.name + (to == DType::F32 ? "_f32" : "_lp"), std::move(t));
    } else {
      AttributeMap a;
      a["to"].kind = Attribute::Kind::kInt;
      a["to"].i = static_cast<int64_t>(to);
      const Shape shape = src.info.shape;
      const bool rank_known = src.info.rank_known;
      out = g->add_node(*cast_op, src.name + (to == DType::F32 ? "/to_f32" : "/to_lp"), {v}, 1, std::move(a))[0];
      g->value(out).info = ValueInfo{to, rank_known, shape, nullptr};
      ++stats.removed;
    }
    casts[key] = out;
    return out;
  };
  auto is_float = [&](DType t) { return t == DType::F32 || t == low; };
  for (size_t n = 0; n < num_nodes; ++n) {
    const std::string op_type = g->nodes()[n].op_type;
    if (bf16 && movement_op(op_type) && !g->nodes()[n].inputs.empty() && g->nodes()[n].inputs[0] != kNoValue)
      low_node[n] = g->value(g->nodes()[n].inputs[0]).info.dtype == low;
    for (size_t i = 0; i < g->nodes()[n].inputs.size(); ++i) {
      const ValueId v = g->nodes()[n].inputs[i];
      if (v == kNoValue) continue;
      const DType have = g->value(v).info.dtype;
      if (!is_float(have)) continue;
      const DType want = low_node[n] && !input_must_stay_f32(op_type, i) ? low : DType::F32;
      if (have == want) continue;
      const ValueId c = converted(v, want);
      g->nodes()[n].inputs[i] = c;  // index again: add_node may have moved nodes()
    }
    const Node& node = g->nodes()[n];
    std::vector<const ValueInfo*> ins(node.inputs.size(), nullptr);
    std::vector<ValueInfo> held(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      const Value& val = g->value(node.inputs[i]);
      held[i] = val.info;
      held[i].value = val.constant ? &*val.constant : nullptr;
      ins[i] = &held[i];
    }
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> outs, infer_node(node, ins, g->opset_for(node)));
    for (size_t o = 0; o < node.outputs.size() && o < outs.size(); ++o)
      if (node.outputs[o] != kNoValue) {
        outs[o].value = nullptr;
        g->value(node.outputs[o]).info = outs[o];
      }
  }

  // The model's f32 outputs stay f32: cast back and let the cast output carry the name.
  for (ValueId& o : g->mutable_outputs()) {
    Value& val = g->value(o);
    if (val.info.dtype != low || val.constant) continue;
    const std::string name = val.name;
    val.name = name + "/lp";
    val.is_graph_output = false;
    const ValueId c = converted(o, DType::F32);
    g->value(c).name = name;
    g->value(c).is_graph_output = true;
    o = c;
  }
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  GPUOPT_LOG(info, "precision {}: {} cast nodes inserted", dtype_name(low), stats.removed);
  return stats;
}

}  // namespace gpuopt
