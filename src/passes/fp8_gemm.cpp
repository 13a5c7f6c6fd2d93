// The fp8 rewrite: GEMMs with a constant weight become Fp8Gemm (fp8.h).
#include "passes/fp8.h"

#include "ops/quant/fp8_e4m3.h"
#include "passes/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

namespace gpuopt {
namespace {

const Tensor* const_of(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return nullptr;
  return &*g.value(v).constant;
}

// One GEMM the rewrite can take, or why not (`why` set, for GEMMs with a constant weight).
struct Match {
  ValueId a = kNoValue, bias = kNoValue;
  const Tensor* w = nullptr;
  bool wt = false;          // W is stored [N, K] already (Gemm transB)
  int64_t k = 0, n = 0;
  std::string activation;   // "", "Relu" or "Gelu", in the Fp8Gemm's epilogue
  std::string gelu_approx;
  std::string why;
};

std::optional<Match> match(const Graph& g, const Node& node) {
  const bool matmul = node.domain.empty() && node.op_type == "MatMul";
  const bool gemm = node.domain.empty() && node.op_type == "Gemm";
  const bool fused = node.domain == "com.microsoft" && node.op_type == "FusedGemm";
  if ((!matmul && !gemm && !fused) || node.inputs.size() < 2 || node.outputs.size() != 1) return std::nullopt;
  Match m;
  m.a = node.inputs[0];
  m.w = const_of(g, node.inputs[1]);
  if (m.a == kNoValue || !m.w || const_of(g, m.a)) return std::nullopt;  // not a layer with a weight
  if (m.w->dtype() != DType::F32 || m.w->rank() != 2) {
    m.why = fmt::format("weight {} is not f32 of rank 2", m.w->describe());
    return m;
  }
  const ValueInfo& ai = g.value(m.a).info;
  if (ai.dtype != DType::F32 || !ai.rank_known || ai.shape.empty()) {
    m.why = "its input is not an f32 tensor of known rank";
    return m;
  }
  m.wt = !matmul && node.attr_i("transB", 0) != 0;
  m.k = m.wt ? m.w->dim(1) : m.w->dim(0);
  m.n = m.wt ? m.w->dim(0) : m.w->dim(1);
  if (!matmul) {
    if (node.attr_i("transA", 0) != 0 || node.attr_f("alpha", 1.f) != 1.f || ai.shape.size() != 2) {
      m.why = "transA, alpha != 1 or an input not of rank 2";
      return m;
    }
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
      const Tensor* c = const_of(g, node.inputs[2]);
      const bool row = c && (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1));
      if (!row || c->dtype() != DType::F32 || c->numel() != m.n || node.attr_f("beta", 1.f) != 1.f) {
        m.why = "its bias is not a constant f32 [N] with beta 1";
        return m;
      }
      m.bias = node.inputs[2];
    }
    if (fused) {
      m.activation = node.attr_s("activation", "");
      m.gelu_approx = node.attr_s("approximate", "none");
      if (!m.activation.empty() && m.activation != "Relu" && m.activation != "Gelu") {
        m.why = fmt::format("activation '{}'", m.activation);
        return m;
      }
    }
  }
  if (dim_is_known(ai.shape.back()) && ai.shape.back() != m.k) {
    m.why = "K differs between input and weight";
    return m;
  }
  if (m.k % 16 != 0 || m.n % 16 != 0)
    m.why = fmt::format("K = {} and N = {} must be multiples of 16 (cuBLASLt fp8)", m.k, m.n);
  return m;
}

std::string node_label(const Graph& g, const Node& n) {
  return n.name.empty() ? g.value(n.outputs[0]).name : n.name;
}

// The chains of fp8.h: returns how many Fp8Gemms now write e4m3.
int chain_fp8(Graph* g) {
  const auto readers = g->consumers();
  auto is = [](const Node& n, std::string_view op, std::string_view domain) { return n.op_type == op && n.domain == domain; };
  int chained = 0;
  for (Node& p : g->nodes()) {
    if (!is(p, "Fp8Gemm", "ai.gpuopt") || p.has_attr("y_scale") || p.outputs.size() != 1) continue;
    ValueId v = p.outputs[0];
    while (v != kNoValue && !g->value(v).is_graph_output) {
      // The one reader of v's data (Shape nodes read only its shape: fuse_matmul_bias's
      // Reshape back to 3-D takes its target from Shape of the GEMM's 3-D input).
      std::vector<int32_t> data;
      for (int32_t c : readers[static_cast<size_t>(v)])
        if (!is(g->nodes()[static_cast<size_t>(c)], "Shape", "")) data.push_back(c);
      if (data.size() != 1) break;
      const Node& r = g->nodes()[static_cast<size_t>(data[0])];
      if (r.inputs.empty() || r.inputs[0] != v) break;
      if (is(r, "Reshape", "") && r.outputs.size() == 1) {
        v = r.outputs[0];
        continue;
      }
      if (is(r, "Fp8Gemm", "ai.gpuopt") && r.inputs.size() > 2 && r.inputs[2] != kNoValue && r.inputs[1] != v) {
        p.attrs["y_scale"] = float_attr(r.attr_f("a_scale", 1.0f));
        ++chained;
      }
      break;
    }
  }
  return chained;
}

// The shared inputs of fp8.h: returns how many Fp8Gemms now read a sibling's e4m3 A.
int share_fp8_inputs(Graph* g) {
  std::map<std::pair<ValueId, float>, std::vector<size_t>> groups;  // (A, a_scale) -> Fp8Gemms
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Node& n = g->nodes()[i];
    if (n.op_type == "Fp8Gemm" && n.domain == "ai.gpuopt" && n.outputs.size() == 1 && !n.inputs.empty() &&
        n.inputs[0] != kNoValue && g->value(n.inputs[0]).info.dtype != DType::U8)
      groups[{n.inputs[0], n.attr_f("a_scale", 1.0f)}].push_back(i);
  }
  int shared = 0;
  for (const auto& [key, members] : groups) {
    std::vector<size_t> readers;  // those that can take a u8 A: they have a bias
    for (size_t j = 1; j < members.size(); ++j) {
      const Node& n = g->nodes()[members[j]];
      if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) readers.push_back(members[j]);
    }
    if (readers.empty()) continue;
    const ValueId q = g->add_value(g->value(key.first).name + "/e4m3");
    g->nodes()[members[0]].outputs.push_back(q);
    for (size_t r : readers) g->nodes()[r].inputs[0] = q;
    shared += static_cast<int>(readers.size());
  }
  return shared;
}

// The norm copies of fp8.h: returns how many SkipLayerNormalizations now write e4m3 codes.
// A GEMM may read the normalised rows through a Reshape (fuse_matmul_bias flattens [B, S, H] to
// [B*S, H]): the codes get a clone of that Reshape (an alias on the GPU, no copy).
int norm_fp8(Graph* g) {
  const auto readers = g->consumers();
  auto is = [](const Node& n, std::string_view op, std::string_view domain) { return n.op_type == op && n.domain == domain; };
  // An Fp8Gemm that can take an e4m3 A: v is its A (not its weight) and it has a bias (a u8 A
  // takes its float type from it).
  auto takes_codes = [&](const Node& r, ValueId v) {
    return is(r, "Fp8Gemm", "ai.gpuopt") && r.inputs.size() > 2 && r.inputs[0] == v && r.inputs[1] != v &&
           r.inputs[2] != kNoValue && r.inputs[2] != v;
  };
  struct Reader {
    int32_t gemm;
    int32_t reshape;  // -1: reads the norm's output directly
  };
  int normed = 0;
  const size_t num_nodes = g->nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node& ln = g->nodes()[i];
    if (!is(ln, "SkipLayerNormalization", "com.microsoft") || ln.outputs.empty() || ln.outputs.size() > 4 ||
        ln.has_attr("fp8_scale"))
      continue;
    const ValueId y = ln.outputs[0];
    if (y == kNoValue || g->value(y).info.dtype != DType::F32) continue;
    std::map<float, std::vector<Reader>> by_scale;  // the largest group of one a_scale gets the codes
    for (int32_t c : readers[static_cast<size_t>(y)]) {
      const Node& r = g->nodes()[static_cast<size_t>(c)];
      if (takes_codes(r, y)) by_scale[r.attr_f("a_scale", 1.0f)].push_back({c, -1});
      if (!is(r, "Reshape", "") || r.inputs.empty() || r.inputs[0] != y || r.outputs.size() != 1) continue;
      for (int32_t c2 : readers[static_cast<size_t>(r.outputs[0])]) {
        const Node& r2 = g->nodes()[static_cast<size_t>(c2)];
        if (takes_codes(r2, r.outputs[0])) by_scale[r2.attr_f("a_scale", 1.0f)].push_back({c2, c});
      }
    }
    if (by_scale.empty()) continue;
    auto best = by_scale.begin();
    for (auto it = by_scale.begin(); it != by_scale.end(); ++it)
      if (it->second.size() > best->second.size()) best = it;
    auto codes_of = [&](ValueId like, const std::string& name) {  // a u8 value of like's shape
      const ValueId v = g->add_value(name);
      g->value(v).info = g->value(like).info;
      g->value(v).info.dtype = DType::U8;  // share_fp8_inputs must see these readers' A as e4m3
      return v;
    };
    const ValueId q = codes_of(y, g->value(y).name + "/e4m3");
    g->nodes()[i].outputs.resize(5, kNoValue);
    g->nodes()[i].outputs[4] = q;
    g->nodes()[i].attrs["fp8_scale"] = float_attr(best->first);
    std::map<int32_t, ValueId> reshaped;  // Reshape node -> its clone's output
    for (const Reader& rd : best->second) {
      ValueId a = q;
      if (rd.reshape >= 0) {
        auto it = reshaped.find(rd.reshape);
        if (it == reshaped.end()) {
          Node clone = g->nodes()[static_cast<size_t>(rd.reshape)];
          const ValueId out = codes_of(clone.outputs[0], g->value(clone.outputs[0]).name + "/e4m3");
          clone.name += "/e4m3";
          clone.inputs[0] = q;
          clone.outputs = {out};
          g->nodes().push_back(std::move(clone));
          it = reshaped.emplace(rd.reshape, out).first;
        }
        a = it->second;
      }
      g->nodes()[static_cast<size_t>(rd.gemm)].inputs[0] = a;
    }
    ++normed;
  }
  return normed;
}

}  // namespace

float fp8_scale(double amax) {
  return std::isfinite(amax) && amax > 0 ? static_cast<float>(amax / fp8::kE4M3Max) : 1.0f;
}

std::vector<std::string> fp8_activation_tensors(const Graph& g) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes()) {
    const auto m = match(g, n);
    if (!m || !m->why.empty()) continue;
    const std::string& name = g.value(m->a).name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

namespace {

// The rewrite, leaving the GEMMs named in `keep` (label -> reason) in float. `dry`: the e4m3
// weights are allocated but not converted (for lone_gemms, which reads only the graph's form).
Result<Fp8Stats> rewrite(Graph* g, const std::map<std::string, double>& act_amax, bool chain, bool norm,
                         const std::map<std::string, std::string>& keep, bool dry) {
  Fp8Stats st;
  const size_t num_nodes = g->nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node node = g->nodes()[i];  // a copy: add_node/add_constant may move the lists
    auto m = match(*g, node);
    if (!m) continue;
    const std::string label = node_label(*g, node);
    if (m->why.empty()) {
      auto it = act_amax.find(g->value(m->a).name);
      if (it == act_amax.end() || !std::isfinite(it->second))
        m->why = fmt::format("no calibrated amax for its input '{}'", g->value(m->a).name);
    }
    if (m->why.empty())
      if (auto k = keep.find(label); k != keep.end()) m->why = k->second;
    if (!m->why.empty()) {
      st.kept.push_back(fmt::format("node '{}': {}", label, m->why));
      continue;
    }
    const float a_scale = fp8_scale(act_amax.at(g->value(m->a).name));
    // The weight: per-tensor scale from its amax, stored [N, K] as e4m3 bit patterns.
    const int64_t k = m->k, n = m->n;
    double w_amax = 0;
    const float* w = m->w->data<float>();
    for (int64_t j = 0; j < m->w->numel() && !dry; ++j)
      if (std::isfinite(w[j])) w_amax = std::max(w_amax, static_cast<double>(std::fabs(w[j])));
    const float b_scale = fp8_scale(w_amax);
    Tensor wq = Tensor::empty(DType::U8, {n, k});
    uint8_t* q = wq.data<uint8_t>();
    for (int64_t r = 0; r < n && !dry; ++r)
      for (int64_t c = 0; c < k; ++c) q[r * k + c] = fp8::f32_to_e4m3((m->wt ? w[r * k + c] : w[c * n + r]) / b_scale);
    ValueId bias = kNoValue;
    if (m->bias != kNoValue) {
      const Tensor& c = *g->value(m->bias).constant;
      bias = c.rank() == 1 ? m->bias : g->add_constant(label + "/fp8_bias", *c.reshaped({n}));
    }
    const ValueId wv = g->add_constant(label + "/fp8_weight", std::move(wq));
    Node f;
    f.op = Op::Fp8Gemm;
    f.op_type = "Fp8Gemm";
    f.domain = "ai.gpuopt";
    f.name = label + "/fp8";
    f.inputs = {m->a, wv};
    if (bias != kNoValue) f.inputs.push_back(bias);
    f.attrs["a_scale"] = float_attr(a_scale);
    f.attrs["b_scale"] = float_attr(b_scale);
    if (m->activation == "Relu") f.attrs["activation"] = string_attr("Relu");
    if (m->activation == "Gelu") {
      f.attrs["activation"] = string_attr("Gelu");
      f.attrs["approximate"] = string_attr(m->gelu_approx);
    }
    f.outputs = {node.outputs[0]};
    g->nodes()[i] = std::move(f);
    ++st.rewritten;
  }
  if (st.rewritten == 0) return st;
  g->rebuild_producers();
  if (norm) {  // first: the GEMMs reading a norm's copy need no sibling to share theirs
    st.normed = norm_fp8(g);
    g->rebuild_producers();
  }
  if (chain) {
    st.shared = share_fp8_inputs(g);
    g->rebuild_producers();
    st.chained = chain_fp8(g);
  }
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return st;
}

// The lone Fp8Gemms of a rewritten graph (fp8.h): each that quantizes its own float A, with the
// siblings reading its e4m3 copy (output 1), kept when their N add up to less than `min_n`.
// Returns label -> reason.
std::map<std::string, std::string> lone_gemms(const Graph& g, int64_t min_n) {
  const auto readers = g.consumers();
  auto fp8 = [](const Node& n) { return n.op_type == "Fp8Gemm" && n.domain == "ai.gpuopt"; };
  auto n_of = [&](const Node& n) {  // the e4m3 weight is [N, K]
    const Tensor* w = const_of(g, n.inputs[1]);
    return w && w->rank() == 2 ? w->dim(0) : int64_t{0};
  };
  auto label = [](const Node& n) {  // the rewritten GEMM's label: its node is "<label>/fp8"
    const std::string_view v = n.name;
    return std::string(v.ends_with("/fp8") ? v.substr(0, v.size() - 4) : v);
  };
  std::map<std::string, std::string> lone;
  for (const Node& n : g.nodes()) {
    if (!fp8(n) || n.inputs.size() < 2 || g.value(n.inputs[0]).info.dtype == DType::U8) continue;
    std::vector<const Node*> group{&n};
    if (n.outputs.size() > 1 && n.outputs[1] != kNoValue)
      for (int32_t c : readers[static_cast<size_t>(n.outputs[1])])
        if (fp8(g.nodes()[static_cast<size_t>(c)])) group.push_back(&g.nodes()[static_cast<size_t>(c)]);
    int64_t total = 0;
    for (const Node* m : group) total += n_of(*m);
    if (total >= min_n) continue;
    for (const Node* m : group)
      lone[label(*m)] = fmt::format(
          "its input '{}' would need a quantize pass of its own for N = {} < {} (fp16 is faster there; "
          "GPUOPT_DISABLE_FUSION=fp8_lone converts it)",
          g.value(n.inputs[0]).name, total, min_n);
  }
  return lone;
}

}  // namespace

Result<Fp8Stats> rewrite_fp8(Graph* g, const std::map<std::string, double>& act_amax, bool chain, bool norm,
                             int64_t lone_min_n) {
  std::map<std::string, std::string> keep;
  // Dry runs until no more GEMMs turn lone: a kept GEMM that wrote another's e4m3 input (a chain)
  // leaves that one lone in the next.
  for (int round = 0; lone_min_n > 0 && round < 8; ++round) {
    Graph dry = *g;
    GPUOPT_RETURN_IF_ERROR(rewrite(&dry, act_amax, chain, norm, keep, /*dry=*/true).status());
    size_t before = keep.size();
    for (auto& [label, why] : lone_gemms(dry, lone_min_n)) keep.emplace(label, std::move(why));
    if (keep.size() == before) break;
  }
  return rewrite(g, act_amax, chain, norm, keep, /*dry=*/false);
}

}  // namespace gpuopt
