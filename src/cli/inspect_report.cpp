// inspect --optimized: the compiler's report (inspect_report.h).
#include "cli/inspect_report.h"

#include "core/table.h"

#include <fmt/format.h>

#include <unordered_map>

namespace gpuopt::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool layout_transpose(const Node& n) {
  return n.op_type == "Transpose" && (ends_with(n.name, "/to_nhwc") || ends_with(n.name, "/to_nchw"));
}

std::string qualified_op(const Node& n) {
  return n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + ":" + n.op_type;
}

// The fusion pass that made node `n` (named like the node it replaced), from the op it has now
// and the op the model had under that name.
void classify_fusion(const Node& n, const std::string& was, NodeReport* r) {
  const bool conv = (n.op_type == "FusedConv" && n.domain == "com.microsoft") ||
                    (n.op_type == "NhwcFusedConv" && n.domain == "ai.gpuopt");
  if (conv && was != "FusedConv") {
    const bool add = n.inputs.size() > 3 && n.inputs[3] != kNoValue;
    const std::string act = n.attr_s("activation", "");
    const bool mean = n.outputs.size() > 1 && n.outputs[1] != kNoValue;  // the se_mean pass's second output
    const std::string in = n.attr_s("input_activation", "");            // the dw_prologue pass's
    if (!add && act.empty() && !mean && in.empty()) return;  // a plain Conv the layout pass made channels-last
    r->fusion = add || !act.empty() ? "conv" : mean ? "se_mean" : "dw_prologue";
    r->epilogue = add && !act.empty() ? "Add+" + act : add ? "Add" : act;
    r->pattern = r->epilogue.empty() ? "Conv" : "Conv+" + r->epilogue;
    if (mean) r->pattern += " (+ spatial mean: se_mean)";
    if (!in.empty()) r->pattern = in + "(input) -> " + r->pattern + " (dw_prologue)";
  } else if (n.op_type == "Gelu" && n.domain.empty() && !was.empty() && was != "Gelu") {
    r->fusion = "gelu";
    r->pattern = n.attr_s("approximate", "none") == "tanh" ? "GELU tanh form (Pow/Mul/Add/Tanh)" : "GELU erf form (Div/Erf/Add/Mul)";
  } else if (n.op_type == "Attention" && n.domain.empty() && !was.empty() && was != "Attention") {
    r->fusion = "attention";
    r->pattern = "MatMul+[scale]+[mask]+Softmax+MatMul -> SDPA";
    if (n.attr_i("nan_to_zero", 0) != 0) r->pattern += " (NaN guard inside)";
    if (n.attr_i("qkv_packed", 0) != 0) r->pattern += " (Q, K, V read in place from one GEMM: merge_qkv)";
  } else if (n.op_type == "Gemm" && n.domain.empty() && was.empty() && ends_with(n.name, "/qkv/proj")) {
    r->fusion = "merge_qkv";  // merge_qkv.cpp names the merged projection <attention>/qkv/proj
    r->pattern = "Q, K, V projections (3 x MatMul+Add) -> one Gemm";
  } else if (n.op_type == "Int8Gemm" && was.empty() && ends_with(n.name, "/qkv/proj")) {
    r->fusion = "merge_qkv";
    r->pattern = "Q, K, V projections (3 x Int8Gemm of one int8 input) -> one Int8Gemm";
  } else if (n.op_type == "Gemm" && n.domain.empty() && was == "MatMul") {
    r->fusion = "matmul_bias";
    r->pattern = "MatMul+Add";
  } else if (n.op_type == "FusedGemm" && n.domain == "com.microsoft" && was != "FusedGemm") {
    r->fusion = "gemm_activation";
    r->epilogue = n.attr_s("activation", "");
    r->pattern = (was == "MatMul" ? "MatMul+Add+" : was + "+") + r->epilogue;
  } else if (n.op_type == "LayerNormalization" && n.domain.empty() && !was.empty() && was != "LayerNormalization") {
    r->fusion = "layernorm";
    r->pattern = "ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div[+Mul][+Add]";
  } else if (n.op_type == "SkipLayerNormalization" && n.domain == "com.microsoft" && was != "SkipLayerNormalization") {
    r->fusion = "skip_layernorm";
    r->pattern = n.outputs.size() > 3 && n.outputs[3] != kNoValue ? "Add+LayerNormalization (sum kept)"
                                                                    : "Add+LayerNormalization";
  }
}

}  // namespace

CompileReport build_compile_report(const Graph& original, const Graph& optimized, const std::vector<NodePlace>* place,
                                   MemoryPlan plan, std::string plan_rules) {
  CompileReport r;
  r.nodes_before = static_cast<int>(original.nodes().size());
  r.nodes_after = static_cast<int>(optimized.nodes().size());
  std::unordered_map<std::string, std::string> was;
  int bn_before = 0, bn_after = 0;
  for (const Node& n : original.nodes()) {
    if (!n.name.empty()) was.emplace(n.name, n.op_type);
    bn_before += n.op_type == "BatchNormalization";
  }
  for (size_t i = 0; i < optimized.nodes().size(); ++i) {
    const Node& n = optimized.nodes()[i];
    bn_after += n.op_type == "BatchNormalization";
    NodeReport nr;
    nr.name = n.name;
    nr.op = qualified_op(n);
    auto it = was.find(n.name);
    classify_fusion(n, it == was.end() ? std::string() : it->second, &nr);
    if (!nr.fusion.empty()) ++r.fusions[nr.fusion];
    if (nr.fusion == "conv" && n.outputs.size() > 1 && n.outputs[1] != kNoValue) ++r.fusions["se_mean"];
    if (nr.fusion != "dw_prologue" && !n.attr_s("input_activation", "").empty()) ++r.fusions["dw_prologue"];
    const Value* out = n.outputs.empty() || n.outputs[0] == kNoValue ? nullptr : &optimized.value(n.outputs[0]);
    if (layout_transpose(n)) {
      ++r.layout_transposes;
    } else {
      if (n.op_type == "Transpose") ++r.other_transposes;
      if (n.domain == "ai.gpuopt" || (out && ends_with(out->name, "_nhwc"))) nr.layout = "NHWC";
      else if (out && out->info.rank_known && out->info.shape.size() == 4 && n.op_type != "Transpose") nr.layout = "NCHW";
    }
    if (nr.layout == "NHWC") ++r.nhwc_nodes;
    if (nr.layout == "NCHW") ++r.nchw_nodes;
    if (out && out->info.dtype != DType::Undefined) {
      nr.precision = std::string(dtype_name(out->info.dtype));
      ++r.precision[nr.precision];
    }
    if (place) nr.place = std::string(node_place_name((*place)[i]));
    r.nodes.push_back(std::move(nr));
  }
  r.batchnorms_folded = std::max(0, bn_before - bn_after);

  r.plan = std::move(plan);
  r.plan_for = std::move(plan_rules);
  return r;
}

nlohmann::json compile_report_json(const Graph& g, const CompileReport& r, bool verbose) {
  nlohmann::json j;
  j["nodes_before"] = r.nodes_before;
  j["nodes_after"] = r.nodes_after;
  j["batchnorms_folded"] = r.batchnorms_folded;
  j["fusion_counts"] = nlohmann::json::object();
  for (const auto& [k, v] : r.fusions) j["fusion_counts"][k] = v;
  j["fusions"] = nlohmann::json::array();
  j["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const NodeReport& n = r.nodes[i];
    nlohmann::json nj{{"name", n.name}, {"op", n.op}, {"layout", n.layout}, {"precision", n.precision}};
    if (!n.place.empty()) nj["placement"] = n.place;
    if (verbose) {  // the edges, so a reader can recompute every tensor's lifetime
      const Node& node = g.nodes()[i];
      for (const char* key : {"inputs", "outputs"}) {
        nlohmann::json names = nlohmann::json::array();
        for (ValueId v : key[0] == 'i' ? node.inputs : node.outputs) names.push_back(v == kNoValue ? "" : g.value(v).name);
        nj[key] = std::move(names);
      }
    }
    if (!n.fusion.empty()) {
      nj["fusion"] = n.fusion;
      j["fusions"].push_back({{"node", n.name}, {"op", n.op}, {"fusion", n.fusion}, {"pattern", n.pattern}, {"epilogue", n.epilogue}});
    }
    j["nodes"].push_back(std::move(nj));
  }
  j["layout"] = {{"nhwc_nodes", r.nhwc_nodes}, {"nchw_nodes", r.nchw_nodes}, {"layout_transposes", r.layout_transposes},
                 {"other_transposes", r.other_transposes}};
  j["precision"] = r.precision;
  const MemoryPlan& p = r.plan;
  nlohmann::json mp{{"rules", r.plan_for},
                    {"alignment", p.alignment},
                    {"arena_bytes", p.arena_bytes},
                    {"activation_bytes", p.naive_bytes},
                    {"peak_live_bytes", p.peak_live_bytes},
                    {"buffers", p.buffers.size()},
                    {"unplanned_values", p.unplanned_values}};
  if (verbose) {
    mp["tensors"] = nlohmann::json::array();
    for (size_t v = 0; v < p.offset.size(); ++v) {
      if (p.offset[v] < 0) continue;
      const PlannedBuffer& b = p.buffers[static_cast<size_t>(p.buffer[v])];
      mp["tensors"].push_back({{"name", g.values()[v].name},
                               {"offset", p.offset[v]},
                               {"bytes", b.bytes},
                               {"first", b.first},
                               {"last", b.last},
                               {"view_of", b.value == static_cast<ValueId>(v) ? "" : g.value(b.value).name}});
    }
  }
  j["memory_plan"] = std::move(mp);
  return j;
}

void print_compile_report(const Graph& g, const CompileReport& r, bool verbose) {
  fmt::print("\ncompiled graph: {} nodes before passes, {} after; {} BatchNormalization folded into convs\n", r.nodes_before,
             r.nodes_after, r.batchnorms_folded);
  bool place = false;
  for (const NodeReport& n : r.nodes) place = place || !n.place.empty();
  std::vector<std::string> header{"node", "op", "fusion", "layout", "precision"};
  if (place) header.push_back("runs on");
  Table t(header);
  for (const NodeReport& n : r.nodes) {
    std::vector<std::string> row{n.name, n.op, n.fusion.empty() ? "" : n.fusion + ": " + n.pattern, n.layout, n.precision};
    if (place) row.push_back(n.place);
    t.add(row);
  }
  fmt::print("{}", t.render());
  std::string fusions;
  for (const auto& [k, v] : r.fusions) fusions += fmt::format("{}{} {}", fusions.empty() ? "" : ", ", v, k);
  fmt::print("fusions   {}\n", fusions.empty() ? "none" : fusions);
  fmt::print("layout    {} nodes NHWC, {} NCHW; transposes: {} at layout edges, {} from the model\n", r.nhwc_nodes,
             r.nchw_nodes, r.layout_transposes, r.other_transposes);
  std::string prec;
  for (const auto& [k, v] : r.precision) prec += fmt::format("{}{} {}", prec.empty() ? "" : ", ", v, k);
  fmt::print("precision {}\n", prec);
  const MemoryPlan& p = r.plan;
  const double ratio = p.naive_bytes ? static_cast<double>(p.arena_bytes) / static_cast<double>(p.naive_bytes) : 0.0;
  fmt::print("memory    arena {} for {} of activations ({:.0f}%; {} live at most), {} buffers, {} activations outside ({})\n",
             format_bytes(static_cast<double>(p.arena_bytes)), format_bytes(static_cast<double>(p.naive_bytes)), ratio * 100,
             format_bytes(static_cast<double>(p.peak_live_bytes)), p.buffers.size(), p.unplanned_values, r.plan_for);
  if (!verbose) return;
  Table m({"tensor", "offset", "bytes", "live (nodes)", "view of"});
  for (size_t v = 0; v < p.offset.size(); ++v) {
    if (p.offset[v] < 0) continue;
    const PlannedBuffer& b = p.buffers[static_cast<size_t>(p.buffer[v])];
    m.add({g.values()[v].name, fmt::format("{}", p.offset[v]), fmt::format("{}", b.bytes),
           fmt::format("{}..{}", b.first, b.last), b.value == static_cast<ValueId>(v) ? "" : g.value(b.value).name});
  }
  fmt::print("\nmemory plan, per tensor:\n{}", m.render());
}

}  // namespace gpuopt::cli
