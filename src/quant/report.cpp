// Quantization report writers (report.h).
#include "quant/report.h"

#include "core/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gpuopt::quant {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// The layer's largest activation saturation and its input scales ("a / b" for two inputs).
std::pair<double, std::string> layer_scales(const QuantizeResult& r, const QuantLayer& L) {
  double sat = 0;
  std::string scales;
  for (const auto& t : L.activations) {
    if (auto it = r.stats.find(t); it != r.stats.end()) sat = std::max(sat, it->second.saturation);
    auto a = r.amax.find(t);
    scales += fmt::format("{}{:.4g}", scales.empty() ? "" : " / ", a == r.amax.end() ? 0.0 : int8_scale(a->second));
  }
  return {sat, scales};
}

}  // namespace

nlohmann::json report_json(const QuantizeResult& r, const ReportContext& c) {
  nlohmann::json j;
  j["model"] = c.model;
  j["output"] = c.output;
  j["method"] = c.method;
  if (!c.cache.empty()) j["calibration_cache"] = c.cache;
  j["calibration_samples"] = r.calibration_samples;
  j["heldout_samples"] = c.heldout_samples;
  j["accuracy_target"] = c.target;
  j["per_channel_weights"] = r.plan.per_channel;
  auto acc_json = [](const Accuracy& a) {
    nlohmann::json o = nlohmann::json::array();
    for (const auto& x : a.outputs) {
      nlohmann::json e{{"name", x.name}, {"rel_l2", x.rel_l2}, {"max_abs", x.max_abs}};
      if (x.top1) e["top1_agreement"] = *x.top1;
      if (x.top5) e["top5_agreement"] = *x.top5;
      o.push_back(e);
    }
    return o;
  };
  if (r.accuracy) j["accuracy"] = acc_json(*r.accuracy);
  if (r.all_int8) j["accuracy_all_int8"] = acc_json(*r.all_int8);
  int quantized = 0;
  for (size_t i = 0; i < r.plan.layers.size(); ++i) {
    const QuantLayer& L = r.plan.layers[i];
    const LayerResult& lr = r.layers[i];
    quantized += lr.quantized;
    nlohmann::json e{{"name", L.name}, {"op", L.op_type}, {"precision", lr.quantized ? "int8" : "float"}};
    nlohmann::json acts = nlohmann::json::array();
    for (const auto& t : L.activations) {
      nlohmann::json a{{"tensor", t}};
      if (auto it = r.amax.find(t); it != r.amax.end()) a["scale"] = int8_scale(it->second), a["amax"] = it->second;
      if (auto it = r.stats.find(t); it != r.stats.end()) a["max_abs"] = it->second.max_abs, a["saturation"] = it->second.saturation;
      acts.push_back(a);
    }
    e["activations"] = acts;
    if (!L.weight.empty()) e["weight"] = {{"tensor", L.weight}, {"axis", L.weight_axis}, {"per_channel", r.plan.per_channel}};
    if (lr.alone_loss) e["loss_alone"] = *lr.alone_loss;
    if (!lr.reason.empty()) e["reason"] = lr.reason;
    j["layers"].push_back(e);
  }
  j["layers_int8"] = quantized;
  j["layers_float"] = static_cast<int>(r.plan.layers.size()) - quantized;
  j["skipped"] = r.plan.notes;
  return j;
}

std::string report_text(const QuantizeResult& r, const ReportContext& c) {
  std::string s;
  int quantized = 0;
  for (const auto& l : r.layers) quantized += l.quantized;
  s += fmt::format("quantized {} -> {}\n", c.model, c.output);
  s += fmt::format("calibration: {}{}, {} weights per {}\n", c.method,
                   c.cache.empty() ? fmt::format(" on {} samples", r.calibration_samples) : fmt::format(" (cache {})", c.cache),
                   "int8 symmetric", r.plan.per_channel ? "output channel" : "tensor (opset < 13)");
  s += fmt::format("layers: {} int8, {} kept in float\n", quantized, r.layers.size() - static_cast<size_t>(quantized));
  auto acc_table = [&](const Accuracy& a, const std::string& title) {
    Table t({"output", "rel-L2", "max-abs", "top-1 agree", "top-5 agree"}, title);
    for (const auto& x : a.outputs)
      t.add({x.name, fmt::format("{:.3e}", x.rel_l2), fmt::format("{:.3e}", x.max_abs),
             x.top1 ? fmt::format("{:.2f}%", 100 * *x.top1) : "-", x.top5 ? fmt::format("{:.2f}%", 100 * *x.top5) : "-"});
    s += t.render();
  };
  if (r.all_int8) acc_table(*r.all_int8, fmt::format("every layer int8, against f32 on {} held-out samples", c.heldout_samples));
  if (r.accuracy)
    acc_table(*r.accuracy, fmt::format("{}against f32 on {} held-out samples{}", r.all_int8 ? "final model, " : "",
                                       c.heldout_samples, c.target == "none" ? "" : fmt::format(" (target: {})", c.target)));
  else
    s += "accuracy: not measured (no held-out samples)\n";
  Table t({"layer", "op", "precision", "input scale", "saturation", "loss alone", "why float"}, "layers");
  for (size_t i = 0; i < r.plan.layers.size(); ++i) {
    const QuantLayer& L = r.plan.layers[i];
    const LayerResult& lr = r.layers[i];
    auto [sat, scales] = layer_scales(r, L);
    t.add({L.name, L.op_type, lr.quantized ? "int8" : "float", scales,
           r.stats.empty() ? "-" : fmt::format("{:.4f}%", 100 * sat), lr.alone_loss ? fmt::format("{:.3g}", *lr.alone_loss) : "-",
           lr.reason});
  }
  s += t.render();
  for (const auto& n : r.plan.notes) s += fmt::format("left in float: {}\n", n);
  return s;
}

std::string report_svg(const QuantizeResult& r, const ReportContext& c) {
  const size_t n = r.plan.layers.size();
  const int row = 16, left = 260, bar = 300, top = 50;
  const int width = left + 2 * bar + 60, height = top + static_cast<int>(n) * row + 30;
  double max_sat = 1e-12, max_loss = 1e-12;
  for (size_t i = 0; i < n; ++i) {
    max_sat = std::max(max_sat, layer_scales(r, r.plan.layers[i]).first);
    if (r.layers[i].alone_loss) max_loss = std::max(max_loss, *r.layers[i].alone_loss);
  }
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"14\">{}: int8 layers ({})</text>\n"
      "<text x=\"{}\" y=\"40\">saturation (max {:.3g}%)</text><text x=\"{}\" y=\"40\">loss alone (max {:.3g})</text>\n",
      width, height, esc(c.model), esc(c.method), left, 100 * max_sat, left + bar + 20, max_loss);
  for (size_t i = 0; i < n; ++i) {
    const QuantLayer& L = r.plan.layers[i];
    const LayerResult& lr = r.layers[i];
    const int y = top + static_cast<int>(i) * row;
    const double sat = layer_scales(r, L).first;
    const int w1 = static_cast<int>(bar * sat / max_sat);
    s += fmt::format("<g class=\"layer\" data-name=\"{}\" data-precision=\"{}\" data-saturation=\"{:.6g}\">", esc(L.name),
                     lr.quantized ? "int8" : "float", sat);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{}\">{}{}</text>", left - 6, y + 11,
                     lr.quantized ? "black" : "#d62728", esc(L.name.size() > 40 ? "..." + L.name.substr(L.name.size() - 37) : L.name),
                     lr.quantized ? "" : " (float)");
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#1f77b4\"/>", left, y + 2, w1, row - 4);
    if (lr.alone_loss) {
      const int w2 = static_cast<int>(bar * *lr.alone_loss / max_loss);
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ff7f0e\"/>", left + bar + 20, y + 2, w2,
                       row - 4);
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

Status write_report(const QuantizeResult& r, const ReportContext& c, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--report '{}': {}", dir, ec.message());
  const std::pair<const char*, std::string> files[] = {
      {"report.txt", report_text(r, c)}, {"report.json", report_json(r, c).dump(2) + "\n"}, {"layers.svg", report_svg(r, c)}};
  for (const auto& [name, text] : files) {
    const std::string p = (std::filesystem::path(dir) / name).string();
    std::ofstream f(p, std::ios::trunc);
    f << text;
    if (!f) return Status::InvalidArgument("--report: cannot write '{}'", p);
  }
  return Status::Ok();
}

}  // namespace gpuopt::quant
