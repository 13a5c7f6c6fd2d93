// layout_nhwc (passes.h): channels-last regions for cuDNN's tensor-core convolutions.
//
// Nodes that can work on NHWC activations are grouped into connected regions (two such nodes
// are connected when one reads the other's output as an activation). A region holding at least
// one convolution is rewritten: each node's 4-D output becomes a fresh NHWC value (fresh, so no
// NCHW shape the model declared for the old value applies to it), inputs from outside the region
// go through one Transpose each (or a pre-transposed constant), and a region value read outside
// the region, or a graph output, gets one Transpose back into its original value. A Transpose
// the model already had that undoes ours is cancelled instead of stacked on it. Per-tensor
// QuantizeLinear/DequantizeLinear are elementwise, so a QDQ model's convs (int8 on the GPU:
// DQ(Q(x)) -> Conv, with the weight's DequantizeLinear folded to a constant) form one region,
// and fold_qdq's Int8Conv (written NCHW, channels_last 0) is a conv of that region: it becomes
// channels_last 1 with its int8 weight transposed to [M, kH, kW, C] here, as NhwcFusedConv's;
// its Int8Add is elementwise.
#include "ops/common/tensor_util.h"
#include "ops/conv/conv_activation.h"
#include "ir/conv2d_attrs.h"
#include "passes/match.h"
#include "passes/passes.h"

#include <map>
#include <numeric>
#include <string_view>

namespace gpuopt {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

enum class Kind { kNone, kConv, kInt8Conv, kPool, kGap, kElementwise };

bool is_elementwise(const Node& n) {
  static constexpr std::string_view kOps[] = {"Relu",        "Clip",      "Sigmoid", "Tanh", "LeakyRelu",
                                              "HardSigmoid", "HardSwish", "Elu",     "Cast", "Neg",
                                              "Abs",         "Add",       "Sub",     "Mul",  "Div"};
  if (!n.domain.empty()) return false;
  for (std::string_view op : kOps)
    if (n.op_type == op) return true;
  return false;
}

Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

struct Rewriter {
  Graph* g = nullptr;
  std::vector<Kind> kind;
  std::vector<std::vector<size_t>> act;  // per node: indices of its 4-D activation inputs
  std::map<ValueId, ValueId> nhwc_of;    // region value (NCHW id) -> its NHWC value
  std::map<ValueId, ValueId> entry;      // value from outside -> its NHWC copy (Transpose or constant)
  std::vector<Node> added;
  PassStats stats;

  bool rank4(ValueId v) const {
    if (v == kNoValue) return false;
    const ValueInfo& i = g->value(v).info;
    return i.rank_known && i.shape.size() == 4;
  }
  bool one_element_constant(ValueId v) const {
    const Value& val = g->value(v);
    return val.constant && val.constant->numel() == 1;
  }
  bool low_rank_constant(ValueId v) const {
    const Value& val = g->value(v);
    return val.constant && val.constant->rank() < 4;
  }
  // The input of a Transpose to NCHW of a 4-D value: enter() reads that instead (the model's
  // permute back from channels-last, as ConvNeXt writes after its MLP).
  bool from_nchw_transpose(ValueId v) const {
    const int32_t p = g->value(v).producer;
    return p >= 0 && is_transpose(g->nodes()[static_cast<size_t>(p)], kToNchw) &&
           rank4(g->nodes()[static_cast<size_t>(p)].inputs[0]);
  }

  // kernel_shape spelled out from W (the CUDA kernel and conv2d_attrs_supported need it).
  static AttributeMap conv_attrs(const Node& n, const Value& w) {
    AttributeMap a = n.attrs;
    if (!n.has_attr("kernel_shape") && w.constant && w.constant->rank() == 4)
      a["kernel_shape"] = ints_attr({w.constant->shape()[2], w.constant->shape()[3]});
    return a;
  }

  Kind classify(const Node& n, std::vector<size_t>* acts) const {
    if (n.domain == "ai.gpuopt" && n.op_type == "Int8Conv") {
      if (n.attr_i("channels_last", 0) != 0 || n.inputs.size() < 4 || n.outputs.size() != 1 || !rank4(n.inputs[0]) ||
          !rank4(n.outputs[0]))
        return Kind::kNone;
      const Value& w = g->value(n.inputs[1]);
      if (!w.constant || w.constant->rank() != 4) return Kind::kNone;
      Node probe;
      probe.attrs = conv_attrs(n, w);
      if (!conv2d_attrs_supported(probe)) return Kind::kNone;
      acts->push_back(0);
      return Kind::kInt8Conv;
    }
    const bool conv = is_default(n, "Conv") || (n.domain == "com.microsoft" && n.op_type == "FusedConv");
    if (conv) {
      if (n.inputs.size() < 2 || n.outputs.size() != 1 || !rank4(n.inputs[0]) || !rank4(n.outputs[0]))
        return Kind::kNone;
      const DType dt = g->value(n.inputs[0]).info.dtype;
      if (dt != DType::F16 && dt != DType::BF16) return Kind::kNone;
      const Value& w = g->value(n.inputs[1]);
      if (!w.constant || w.constant->rank() != 4 || w.constant->dtype() != dt) return Kind::kNone;
      if (!conv_act_from_name(n.attr_s("activation", ""))) return Kind::kNone;  // no CUDA epilogue for it
      Node probe;
      probe.attrs = conv_attrs(n, w);
      if (!conv2d_attrs_supported(probe)) return Kind::kNone;
      acts->push_back(0);
      if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
        if (!rank4(n.inputs[3])) return Kind::kNone;
        acts->push_back(3);
      }
      return Kind::kConv;
    }
    if (n.domain == "ai.gpuopt" && n.op_type == "Int8Add") {  // elementwise on two equal shapes
      if (n.inputs.size() < 4 || n.outputs.size() != 1 || !rank4(n.inputs[0]) || !rank4(n.inputs[2]) ||
          !rank4(n.outputs[0]))
        return Kind::kNone;
      acts->push_back(0);
      acts->push_back(2);
      return Kind::kElementwise;
    }
    if (is_default(n, "MaxPool")) {
      // The CUDA kernels read explicit pads (auto_pad SAME_* stays NCHW); Indices is NCHW-only.
      const std::string ap = n.attr_s("auto_pad", "NOTSET");
      if (n.inputs.empty() || !rank4(n.inputs[0]) || (n.outputs.size() > 1 && n.outputs[1] != kNoValue) ||
          n.attr_ints("kernel_shape").size() != 2 || (ap != "NOTSET" && ap != "VALID"))
        return Kind::kNone;
      acts->push_back(0);
      return Kind::kPool;
    }
    if (is_default(n, "GlobalAveragePool")) {
      if (n.inputs.empty() || !rank4(n.inputs[0]) || !dtype_is_float(g->value(n.inputs[0]).info.dtype))
        return Kind::kNone;
      acts->push_back(0);
      return Kind::kGap;
    }
    // The same mean as the dynamo exporter writes AdaptiveAvgPool2d(1): ReduceMean over [-1, -2].
    if (is_default(n, "ReduceMean")) {
      if (n.inputs.empty() || n.outputs.size() != 1 || !rank4(n.inputs[0]) ||
          !dtype_is_float(g->value(n.inputs[0]).info.dtype) || n.attr_i("keepdims", 1) != 1 ||
          reduce_axes(*g, n, 4) != std::vector<int64_t>{2, 3})
        return Kind::kNone;
      acts->push_back(0);
      return Kind::kGap;
    }
    if (is_default(n, "QuantizeLinear") || is_default(n, "DequantizeLinear")) {
      // Per tensor only (a one-element scale and zero point): then it is elementwise and any
      // layout will do. A per-channel one names its axis in NCHW terms and stays outside.
      if (n.inputs.size() < 2 || n.outputs.size() != 1 || !rank4(n.inputs[0]) || !rank4(n.outputs[0]) ||
          n.attr_i("block_size", 0) != 0)
        return Kind::kNone;
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (n.inputs[i] != kNoValue && !one_element_constant(n.inputs[i])) return Kind::kNone;
      acts->push_back(0);
      return Kind::kElementwise;
    }
    if (is_elementwise(n)) {
      if (n.outputs.size() != 1 || !rank4(n.outputs[0])) return Kind::kNone;
      // The f32 Cast of a graph output (precision.h) stays outside: the exit Transpose then
      // moves the narrower tensor.
      const Value& out = g->value(n.outputs[0]);
      if (n.op_type == "Cast" && out.is_graph_output &&
          dtype_size(out.info.dtype) > dtype_size(g->value(n.inputs[0]).info.dtype))
        return Kind::kNone;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        if (v == kNoValue || (!rank4(v) && one_element_constant(v))) continue;
        // A constant of lower rank broadcasts from the right in NCHW terms (ConvNeXt's layer
        // scale [C, 1, 1]): enter() pads it to rank 4 and transposes it like a 4-D one.
        if (!rank4(v) && !low_rank_constant(v)) return Kind::kNone;
        acts->push_back(i);
      }
      return acts->empty() ? Kind::kNone : Kind::kElementwise;
    }
    return Kind::kNone;
  }

  ValueId fresh_value(const std::string& name, DType dt) {
    const ValueId v = g->add_value(name);
    g->value(v).info.dtype = dt;
    return v;
  }

  ValueId add_transpose(ValueId in, ValueId out, const std::vector<int64_t>& perm, const std::string& name) {
    Node t;
    t.op = Op::Transpose;
    t.op_type = "Transpose";
    t.name = name;
    t.inputs = {in};
    t.outputs = {out};
    t.attrs["perm"] = ints_attr(perm);
    added.push_back(std::move(t));
    return out;
  }

  static bool is_transpose(const Node& n, const std::vector<int64_t>& perm) {
    return is_default(n, "Transpose") && n.inputs.size() == 1 && n.attr_ints("perm") == perm;
  }

  // The NHWC form of a value from outside the region: a constant transposed now, the input of a
  // Transpose that made it NCHW, or a new Transpose (one per value, shared by its readers).
  ValueId enter(ValueId v) {
    if (auto it = entry.find(v); it != entry.end()) return it->second;
    const Value& val = g->value(v);
    ValueId out;
    if (val.constant) {
      const Tensor& src = *val.constant;
      Shape s4(4 - static_cast<size_t>(src.rank()), 1);  // numpy broadcasting: pad on the left
      s4.insert(s4.end(), src.shape().begin(), src.shape().end());
      Tensor dst = Tensor::empty(src.dtype(), {s4[0], s4[2], s4[3], s4[1]});
      tensor_util::transpose_view(src, s4, kToNhwc, dst);
      out = g->add_constant(val.name + "_nhwc", std::move(dst));
    } else if (from_nchw_transpose(v)) {
      out = g->nodes()[static_cast<size_t>(val.producer)].inputs[0];
    } else {
      const std::string name = val.name + "_nhwc";
      out = add_transpose(v, fresh_value(name, val.info.dtype), kToNhwc, name + "/to_nhwc");
    }
    entry[v] = out;
    return out;
  }

  void rewrite(Node& n, Kind k) {
    for (size_t i : act[static_cast<size_t>(&n - g->nodes().data())]) {
      const ValueId v = n.inputs[i];
      auto it = nhwc_of.find(v);
      n.inputs[i] = it != nhwc_of.end() ? it->second : enter(v);
    }
    const ValueId old_out = n.outputs[0];
    const std::string out_name = g->value(old_out).name + "_nhwc";
    const ValueId out = fresh_value(out_name, g->value(old_out).info.dtype);
    nhwc_of[old_out] = out;
    n.outputs[0] = out;
    ++stats.rewritten;
    switch (k) {
      case Kind::kConv: {
        const ValueId w = n.inputs[1];
        n.attrs = conv_attrs(n, g->value(w));
        n.inputs[1] = enter(w);
        n.op = *op_from_name("NhwcFusedConv");
        n.op_type = "NhwcFusedConv";
        n.domain = "ai.gpuopt";
        while (n.inputs.size() > 2 && n.inputs.back() == kNoValue) n.inputs.pop_back();
        break;
      }
      case Kind::kInt8Conv: {
        const ValueId w = n.inputs[1];
        n.attrs = conv_attrs(n, g->value(w));
        n.inputs[1] = enter(w);
        n.attrs["channels_last"].i = 1;
        break;
      }
      case Kind::kPool:
        n.op = *op_from_name("NhwcMaxPool");
        n.op_type = "NhwcMaxPool";
        n.domain = "ai.gpuopt";
        n.outputs.resize(1);
        n.attrs.erase("storage_order");  // it orders Indices only, which NhwcMaxPool has not
        break;
      case Kind::kGap:
        // [N, H, W, C] -> [N, 1, 1, C]: the same bytes as GlobalAveragePool's [N, C, 1, 1] (or a
        // spatial ReduceMean's with keepdims).
        n.op = Op::ReduceMean;
        n.op_type = "ReduceMean";
        n.inputs.resize(1);  // a ReduceMean's NCHW axes go
        n.attrs.clear();
        n.attrs["keepdims"].i = 1;  // an Attribute is an int by default
        if (g->opset >= 18) {
          Tensor axes = Tensor::empty(DType::I64, {2});
          axes.data<int64_t>()[0] = 1;
          axes.data<int64_t>()[1] = 2;
          n.inputs.push_back(g->add_constant(n.name + "/axes_hw", std::move(axes)));
        } else {
          n.attrs["axes"] = ints_attr({1, 2});
        }
        break;
      case Kind::kElementwise:
      case Kind::kNone:
        break;
    }
  }

  Status run() {
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());
    g->rebuild_producers();
    const size_t count = g->nodes().size();
    kind.assign(count, Kind::kNone);
    act.assign(count, {});
    std::vector<int32_t> parent(count);
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int32_t x) {
      while (parent[static_cast<size_t>(x)] != x)
        x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
      return x;
    };
    for (size_t n = 0; n < count; ++n) {
      kind[n] = classify(g->nodes()[n], &act[n]);
      bool linked = false;
      for (size_t i : act[n]) {
        const int32_t p = g->value(g->nodes()[n].inputs[i]).producer;
        if (p < 0 || kind[static_cast<size_t>(p)] == Kind::kNone) continue;
        parent[static_cast<size_t>(find(p))] = find(static_cast<int32_t>(n));
        linked = true;
      }
      // An elementwise node fed only from outside (a Cast of the graph input) stays outside:
      // the region's entry Transpose then moves the smaller, converted tensor. One that reads a
      // model's permute back to NCHW may join (a region reader links it), since entering it
      // cancels that permute instead of adding a Transpose.
      if (kind[n] == Kind::kElementwise && !linked) {
        bool cancels = false;
        for (size_t i : act[n]) cancels = cancels || from_nchw_transpose(g->nodes()[n].inputs[i]);
        if (!cancels) kind[n] = Kind::kNone;
      }
    }
    std::vector<bool> has_conv(count, false);
    for (size_t n = 0; n < count; ++n)
      if (kind[n] == Kind::kConv || kind[n] == Kind::kInt8Conv) has_conv[static_cast<size_t>(find(static_cast<int32_t>(n)))] = true;
    for (size_t n = 0; n < count; ++n) {
      if (kind[n] == Kind::kNone || !has_conv[static_cast<size_t>(find(static_cast<int32_t>(n)))]) continue;
      rewrite(g->nodes()[n], kind[n]);
    }
    if (nhwc_of.empty()) return Status::Ok();
    // A Transpose to NHWC that the model applies to a region value reads our NHWC value instead.
    std::map<ValueId, ValueId> replace;
    std::vector<bool> drop(g->nodes().size(), false);
    for (size_t i = 0; i < g->nodes().size(); ++i) {
      const Node& n = g->nodes()[i];
      if (is_transpose(n, kToNhwc) && nhwc_of.count(n.inputs[0]) && !g->value(n.outputs[0]).is_graph_output) {
        replace[n.outputs[0]] = nhwc_of.at(n.inputs[0]);
        drop[i] = true;
      }
    }
    std::vector<bool> read(g->values().size(), false);
    for (size_t i = 0; i < g->nodes().size(); ++i)
      for (ValueId& v : g->nodes()[i].inputs) {
        if (auto it = replace.find(v); it != replace.end()) v = it->second;
        if (v != kNoValue && !drop[i]) read[static_cast<size_t>(v)] = true;
      }
    erase_nodes(g, drop);
    stats.removed = static_cast<int>(replace.size());
    for (const auto& [v, nv] : nhwc_of) {
      const Value& val = g->value(v);
      if (val.is_graph_output || read[static_cast<size_t>(v)]) add_transpose(nv, v, kToNchw, val.name + "/to_nchw");
    }
    std::vector<ValueId> ours;
    for (Node& t : added) {
      ours.push_back(t.outputs[0]);
      g->nodes().push_back(std::move(t));
    }
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());  // remove_dead_nodes walks the nodes in reverse order
    // What goes: the model's Transposes we cancelled (and exits only they read), old weights.
    GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
    stats.removed += dead.removed;
    stats.added = 0;
    for (ValueId v : ours) stats.added += g->value(v).producer >= 0;
    return g->infer_shapes();
  }
};

}  // namespace

Result<PassStats> layout_nhwc(Graph* g) {
  Rewriter r;
  r.g = g;
  GPUOPT_RETURN_IF_ERROR(r.run());
  return r.stats;
}

}  // namespace gpuopt
