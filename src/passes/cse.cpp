// Common subexpressions: a node with the same op, domain, attributes and inputs as an earlier one
// computes the same values, so its readers read the earlier node's outputs and it goes. The
// legacy BERT export builds its attention mask, Where(mask, 0, -inf) over [batch, 1, seq, seq],
// once per layer from the same inputs: 12 identical elementwise passes at each run, one after
// this pass. Random ops, nodes without inputs and nodes writing graph outputs stay, and so do
// QuantizeLinear/DequantizeLinear: in the QDQ format each consumer owns its pair (ONNX Runtime
// keeps a DequantizeLinear per node unit too), which fold_qdq's patterns rely on.
#include "passes/passes.h"

#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

namespace gpuopt {
namespace {

bool kept_apart(const Node& n) {
  static const char* const kRandom[] = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                        "Bernoulli", "Multinomial", "Dropout", "QuantizeLinear", "DequantizeLinear"};
  for (const char* op : kRandom)
    if (n.op_type == op) return true;
  return false;
}

void append(std::string* k, const void* p, size_t n) { k->append(static_cast<const char*>(p), n); }

void append_tensor(std::string* k, const Tensor& t) {
  const int dt = static_cast<int>(t.dtype());
  append(k, &dt, sizeof dt);
  for (int64_t d : t.shape()) append(k, &d, sizeof d);
  if (t.nbytes()) append(k, t.raw(), t.nbytes());
}

// The node's identity as bytes; false when an attribute cannot be compared (string tensors).
// Small constant inputs count by their contents (each layer's own copy of the scalar -inf).
bool node_key(const Graph& g, const Node& n, std::string* k) {
  *k = n.domain + '\x1f' + n.op_type + '\x1f';
  for (ValueId in : n.inputs) {
    const auto& c = in == kNoValue ? std::nullopt : g.value(in).constant;
    if (c && c->dtype() != DType::String && c->numel() <= 64) {
      k->push_back('c');
      append_tensor(k, *c);
    } else {
      k->push_back('v');
      append(k, &in, sizeof in);
    }
  }
  k->push_back('\x1f');
  k->append(std::to_string(n.outputs.size()));
  for (const auto& [name, a] : n.attrs) {
    k->push_back('\x1e');
    k->append(name);
    const int kind = static_cast<int>(a.kind);
    append(k, &kind, sizeof kind);
    switch (a.kind) {
      case Attribute::Kind::kFloat: append(k, &a.f, sizeof a.f); break;
      case Attribute::Kind::kInt: append(k, &a.i, sizeof a.i); break;
      case Attribute::Kind::kString: k->append(a.s).push_back('\0'); break;
      case Attribute::Kind::kFloats: append(k, a.floats.data(), a.floats.size() * sizeof(float)); break;
      case Attribute::Kind::kInts: append(k, a.ints.data(), a.ints.size() * sizeof(int64_t)); break;
      case Attribute::Kind::kStrings:
        for (const auto& s : a.strings) k->append(s).push_back('\0');
        break;
      case Attribute::Kind::kGraph: return false;  // subgraphs are not compared
      case Attribute::Kind::kTensor: {
        if (a.t.dtype() == DType::String) return false;
        append_tensor(k, a.t);
        break;
      }
    }
  }
  return true;
}

}  // namespace

Result<PassStats> eliminate_common_subexpressions(Graph* g) {
  PassStats stats;
  std::vector<ValueId> replace(g->values().size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<ValueId>(v);
  std::unordered_map<std::string, size_t> seen;  // key -> index in kept
  std::vector<Node> kept;
  std::string key;
  for (Node& n : g->nodes()) {
    for (ValueId& in : n.inputs)
      if (in != kNoValue) in = replace[static_cast<size_t>(in)];
    bool writes_output = false;
    for (ValueId o : n.outputs) writes_output = writes_output || (o != kNoValue && g->value(o).is_graph_output);
    if (!n.inputs.empty() && !kept_apart(n) && !writes_output && node_key(*g, n, &key)) {
      auto [it, fresh] = seen.emplace(key, kept.size());
      if (!fresh) {
        const Node& first = kept[it->second];
        bool same_outputs = first.outputs.size() == n.outputs.size();
        for (size_t i = 0; same_outputs && i < n.outputs.size(); ++i)
          same_outputs = (first.outputs[i] == kNoValue) == (n.outputs[i] == kNoValue) || n.outputs[i] == kNoValue;
        if (same_outputs) {
          for (size_t i = 0; i < n.outputs.size(); ++i)
            if (n.outputs[i] != kNoValue) replace[static_cast<size_t>(n.outputs[i])] = first.outputs[i];
          ++stats.removed;
          continue;
        }
      }
    }
    kept.push_back(std::move(n));
  }
  g->nodes() = std::move(kept);
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
