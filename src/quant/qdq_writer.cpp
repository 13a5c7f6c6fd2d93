// QDQ placement and the ModelProto rewrite (qdq_writer.h).
#include "quant/qdq_writer.h"

#include "core/tensor.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace gpuopt::quant {
namespace {

int default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return static_cast<int>(o.version());
  return 0;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

std::string node_label(const onnx::NodeProto& n, int i) {
  if (!n.name().empty()) return n.name();
  if (n.output_size() > 0 && !n.output(0).empty()) return n.output(0);
  return fmt::format("{}_{}", n.op_type(), i);
}

const onnx::TensorProto* find_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

void set_raw(onnx::TensorProto* p, const Tensor& t) {
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  p->clear_dims();
  for (int64_t d : t.shape()) p->add_dims(d);
  p->clear_float_data();
  p->clear_int32_data();
  p->clear_int64_data();
  p->clear_double_data();
  p->clear_uint64_data();
  p->clear_external_data();
  p->clear_data_location();
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

class Names {
 public:
  explicit Names(const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      used_.insert(n.name());
      for (const auto& o : n.output()) used_.insert(o);
    }
    for (const auto& t : g.initializer()) used_.insert(t.name());
    for (const auto& v : g.input()) used_.insert(v.name());
    for (const auto& v : g.output()) used_.insert(v.name());
  }
  std::string fresh(const std::string& base) {
    std::string s = base;
    for (int k = 1; used_.count(s); ++k) s = fmt::format("{}_{}", base, k);
    used_.insert(s);
    return s;
  }

 private:
  std::unordered_set<std::string> used_;
};

onnx::TensorProto* add_init(onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  onnx::TensorProto* p = g->add_initializer();
  set_raw(p, t);
  p->set_name(name);
  return p;
}

onnx::NodeProto make_node(const std::string& op, const std::string& name, std::vector<std::string> in, std::string out,
                          int axis = -1000) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (auto& s : in) n.add_input(s);
  n.add_output(out);
  if (axis != -1000) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

}  // namespace

std::vector<float> channel_scales(const float* w, const std::vector<int64_t>& shape, int axis) {
  int64_t outer = 1, inner = 1;
  const int64_t c = shape.empty() ? 1 : shape[static_cast<size_t>(axis)];
  for (int i = 0; i < axis; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<double> m(static_cast<size_t>(c), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < inner; ++i)
        m[static_cast<size_t>(k)] = std::max(m[static_cast<size_t>(k)], std::fabs(static_cast<double>(w[(o * c + k) * inner + i])));
  std::vector<float> s(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) s[static_cast<size_t>(k)] = m[static_cast<size_t>(k)] > 0 ? static_cast<float>(m[static_cast<size_t>(k)] / 127.0) : 1.0f;
  return s;
}

Result<QuantPlan> plan_quantization(const onnx::ModelProto& model, const std::map<std::string, DType>& dtypes) {
  const onnx::GraphProto& g = model.graph();
  const int opset = default_opset(model);
  if (opset < 10)
    return Status::InvalidArgument("opset {}: QuantizeLinear/DequantizeLinear need opset 10 or newer (13 for per-channel weights)", opset);
  QuantPlan plan;
  plan.per_channel = opset >= 13;
  std::unordered_set<std::string> statics;
  std::unordered_map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) {
    statics.insert(t.name());
    inits[t.name()] = &t;
  }
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, std::vector<int>> consumers;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_type() == "Constant")
      for (const auto& o : n.output()) statics.insert(o);
    for (const auto& o : n.output()) producer[o] = i;
    for (const auto& in : n.input()) consumers[in].push_back(i);
  }
  auto is_f32 = [&](const std::string& t) {
    auto it = dtypes.find(t);
    return it != dtypes.end() && it->second == DType::F32;
  };
  auto is_act = [&](const std::string& t) { return !t.empty() && !statics.count(t) && is_f32(t); };
  auto weight_rank = [&](const std::string& t) -> int {
    auto it = inits.find(t);
    if (it == inits.end() || it->second->data_type() != onnx::TensorProto::FLOAT) return -1;
    return it->second->dims_size();
  };
  // Does `t` reach a Conv / pool / Gemm / MatMul, directly or through one Relu?
  auto feeds_quantized = [&](const std::string& t) {
    auto reads = [&](const std::string& v, auto&& self, int depth) -> bool {
      for (int c : consumers[v]) {
        const std::string& op = g.node(c).op_type();
        if (op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "Gemm" || op == "MatMul")
          return true;
        if (op == "Relu" && depth == 0 && self(g.node(c).output(0), self, 1)) return true;
      }
      return false;
    };
    return reads(t, reads, 0);
  };

  std::set<std::string> tensors;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string& op = n.op_type();
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    QuantLayer L;
    L.node = i;
    L.name = node_label(n, i);
    L.op_type = op;
    auto note = [&](const std::string& why) { plan.notes.push_back(fmt::format("{} '{}': {}", op, L.name, why)); };
    if (op == "Conv" || op == "Gemm" || (op == "MatMul" && n.input_size() == 2 && statics.count(n.input(1)))) {
      if (n.input_size() < 2 || !is_act(n.input(0))) {
        note("input is not an f32 activation");
        continue;
      }
      const int r = weight_rank(n.input(1));
      if (r < 2 || (op == "Gemm" && r != 2)) {
        note("weight is not an f32 initializer of rank >= 2");
        continue;
      }
      if (op == "Gemm" && attr_int(n, "transA", 0) != 0) {
        note("transA=1 is left in float");
        continue;
      }
      L.activations = {n.input(0)};
      L.weight = n.input(1);
      if (op == "Conv") L.weight_axis = 0;
      else if (op == "Gemm") L.weight_axis = attr_int(n, "transB", 0) ? 0 : 1;
      else L.weight_axis = r - 1;
    } else if (op == "MatMul" && n.input_size() == 2) {
      if (!is_act(n.input(0)) || !is_act(n.input(1))) {
        note("inputs are not f32 activations");
        continue;
      }
      L.activations = {n.input(0), n.input(1)};
    } else if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") {
      if (!is_act(n.input(0))) continue;
      L.activations = {n.input(0)};
      if (op == "MaxPool" && n.output_size() >= 1) plan.same_range.emplace_back(n.output(0), n.input(0));
    } else if (op == "Add" && n.input_size() == 2) {
      if (!is_act(n.input(0)) || !is_act(n.input(1)) || !feeds_quantized(n.output(0))) continue;
      L.activations = {n.input(0), n.input(1)};
    } else {
      continue;
    }
    for (const auto& t : L.activations) tensors.insert(t);
    plan.layers.push_back(std::move(L));
  }
  // Graph order: inputs first, then node outputs in node order.
  std::vector<std::string> order;
  for (const auto& v : g.input())
    if (tensors.count(v.name())) order.push_back(v.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (tensors.count(o)) order.push_back(o);
  plan.tensors = std::move(order);
  return plan;
}

Result<onnx::ModelProto> write_qdq(const onnx::ModelProto& model, const std::string& model_dir, const QuantPlan& plan,
                                   const std::map<std::string, double>& amax, const std::vector<bool>& keep) {
  if (keep.size() != plan.layers.size()) return Status::Internal("write_qdq: {} flags for {} layers", keep.size(), plan.layers.size());
  onnx::ModelProto out = model;
  onnx::GraphProto* g = out.mutable_graph();
  Names names(*g);
  std::map<std::string, std::string> act_dq;     // activation -> its dequantized name
  std::map<std::string, std::string> weight_dq;  // weight -> its dequantized name
  std::vector<onnx::NodeProto> head;             // weight DQs and graph-input Q/DQs
  std::map<std::string, std::vector<onnx::NodeProto>> after;  // tensor -> its Q/DQ nodes
  std::set<std::string> graph_inputs;
  for (const auto& v : g->input()) graph_inputs.insert(v.name());
  const Tensor zp0 = Tensor::zeros(DType::I8, {});

  auto act = [&](const std::string& t) -> Result<std::string> {
    if (auto it = act_dq.find(t); it != act_dq.end()) return it->second;
    auto a = amax.find(t);
    if (a == amax.end()) return Status::InvalidArgument("no calibration range for tensor '{}' (a calibration cache from another model?)", t);
    const std::string s = names.fresh(t + "_scale"), z = names.fresh(t + "_zero_point");
    add_init(g, s, Tensor::scalar_f32(a->second > 0 ? static_cast<float>(a->second / 127.0) : 1.0f));
    add_init(g, z, zp0);
    const std::string q = names.fresh(t + "_quantized"), dq = names.fresh(t + "_dequantized");
    std::vector<onnx::NodeProto>& dst = graph_inputs.count(t) ? head : after[t];
    dst.push_back(make_node("QuantizeLinear", names.fresh(t + "_QuantizeLinear"), {t, s, z}, q));
    dst.push_back(make_node("DequantizeLinear", names.fresh(t + "_DequantizeLinear"), {q, s, z}, dq));
    act_dq[t] = dq;
    return dq;
  };
  auto weight = [&](const QuantLayer& L) -> Result<std::string> {
    if (auto it = weight_dq.find(L.weight); it != weight_dq.end()) return it->second;
    const onnx::TensorProto* p = find_initializer(*g, L.weight);
    if (!p) return Status::Internal("weight '{}' is not an initializer", L.weight);
    GPUOPT_ASSIGN_OR_RETURN(Tensor w, tensor_from_proto(*p, model_dir, fmt::format("initializer '{}'", L.weight)));
    std::vector<int64_t> shape(w.shape().begin(), w.shape().end());
    std::vector<float> sc;
    if (plan.per_channel) {
      sc = channel_scales(w.data<float>(), shape, L.weight_axis);
    } else {
      double m = 0;
      for (int64_t i = 0; i < w.numel(); ++i) m = std::max(m, std::fabs(static_cast<double>(w.data<float>()[i])));
      sc.assign(1, m > 0 ? static_cast<float>(m / 127.0) : 1.0f);
    }
    Tensor q = Tensor::empty(DType::I8, w.shape());
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(L.weight_axis) + 1; i < shape.size(); ++i) inner *= shape[i];
    const int64_t c = shape[static_cast<size_t>(L.weight_axis)];
    for (int64_t i = 0; i < w.numel(); ++i) {
      const float s = plan.per_channel ? sc[static_cast<size_t>((i / inner) % c)] : sc[0];
      q.data<int8_t>()[i] = static_cast<int8_t>(std::clamp(std::nearbyint(w.data<float>()[i] / s), -127.0f, 127.0f));
    }
    const std::string qn = names.fresh(L.weight + "_quantized"), sn = names.fresh(L.weight + "_scale"),
                      zn = names.fresh(L.weight + "_zero_point"), dq = names.fresh(L.weight + "_dequantized");
    add_init(g, qn, q);
    if (plan.per_channel) {
      add_init(g, sn, Tensor::from_vector(DType::F32, {c}, sc));
      add_init(g, zn, Tensor::zeros(DType::I8, {c}));
      head.push_back(make_node("DequantizeLinear", names.fresh(L.weight + "_DequantizeLinear"), {qn, sn, zn}, dq, L.weight_axis));
    } else {
      add_init(g, sn, Tensor::scalar_f32(sc[0]));
      add_init(g, zn, zp0);
      head.push_back(make_node("DequantizeLinear", names.fresh(L.weight + "_DequantizeLinear"), {qn, sn, zn}, dq));
    }
    weight_dq[L.weight] = dq;
    return dq;
  };

  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  for (size_t li = 0; li < plan.layers.size(); ++li) {
    if (!keep[li]) continue;
    const QuantLayer& L = plan.layers[li];
    onnx::NodeProto& n = nodes[static_cast<size_t>(L.node)];
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string in = n.input(k);
      if (std::find(L.activations.begin(), L.activations.end(), in) != L.activations.end()) {
        GPUOPT_ASSIGN_OR_RETURN(std::string dq, act(in));
        n.set_input(k, dq);
      } else if (!L.weight.empty() && in == L.weight && k == 1) {
        GPUOPT_ASSIGN_OR_RETURN(std::string dq, weight(L));
        n.set_input(k, dq);
      }
    }
  }
  g->clear_node();
  for (auto& n : head) *g->add_node() = std::move(n);
  for (auto& n : nodes) {
    *g->add_node() = n;
    for (const auto& o : n.output())
      if (auto it = after.find(o); it != after.end())
        for (auto& qn : it->second) *g->add_node() = qn;
  }
  // Drop float weights nothing reads any more; write the remaining external ones inline.
  std::unordered_set<std::string> read;
  for (const auto& n : g->node())
    for (const auto& in : n.input()) read.insert(in);
  for (const auto& o : g->output()) read.insert(o.name());
  auto* inits = g->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i) {
    onnx::TensorProto* t = inits->Mutable(i);
    if (!read.count(t->name())) {
      inits->DeleteSubrange(i, 1);
      continue;
    }
    if (t->data_location() == onnx::TensorProto::EXTERNAL) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor v, tensor_from_proto(*t, model_dir, fmt::format("initializer '{}'", t->name())));
      set_raw(t, v);
    }
  }
  // Graph inputs that were also initializers (old exports) and were dropped stay declared: fine.
  return out;
}

Result<onnx::ModelProto> read_model_proto(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("model '{}': cannot open", path);
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) return Status::InvalidArgument("model '{}': not an ONNX ModelProto", path);
  return m;
}

Status write_model_proto(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::InvalidArgument("output '{}': cannot create", path);
  if (!model.SerializeToOstream(&f)) return Status::InvalidArgument("output '{}': writing failed (model over 2 GiB?)", path);
  return Status::Ok();
}

bool has_quantized_ops(const onnx::ModelProto& model) {
  for (const auto& n : model.graph().node()) {
    const std::string& op = n.op_type();
    if (op == "QuantizeLinear" || op == "DequantizeLinear" || op.rfind("QLinear", 0) == 0 || op == "MatMulInteger" ||
        op == "ConvInteger" || op == "DynamicQuantizeLinear")
      return true;
  }
  return false;
}

}  // namespace gpuopt::quant
