// Calibration runs, accuracy measurement and the mixed-precision search (quantizer.h).
#include "quant/quantizer.h"

#include "ir/graph.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "quant/calib_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace gpuopt::quant {
namespace {

NamedTensors feeds_of(const Sample& s, const std::vector<TensorInfo>& inputs) {
  NamedTensors f;
  for (size_t i = 0; i < inputs.size() && i < s.inputs.size(); ++i) f.emplace_back(inputs[i].name, s.inputs[i]);
  return f;
}

void report(const QuantizeOptions& o, std::string_view stage, size_t done, size_t total) {
  if (o.progress) o.progress(stage, done, total);
}

}  // namespace

Result<std::map<std::string, Histogram>> collect_histograms(const Graph& graph, const std::vector<std::string>& tensors,
                                                            const std::vector<Sample>& samples, const QuantizeOptions& o) {
  Graph g = graph;
  std::map<std::string, Histogram> hist;
  std::vector<std::string> extra;  // tensors read from the outputs, in output order after the model's
  std::map<std::string, size_t> from_input;
  for (size_t i = 0; i < g.inputs().size(); ++i) from_input[g.value(g.inputs()[i]).name] = i;
  for (const auto& t : tensors) {
    hist[t];
    if (from_input.count(t)) continue;
    auto v = g.find_value(t);
    if (!v) return Status::Internal("calibration: tensor '{}' is not in the imported graph", t);
    if (!g.value(*v).is_graph_output) g.mark_output(*v);
  }
  SessionOptions so;
  so.device = o.device;
  so.optimize = false;  // every planned tensor must survive as it is in the model
  so.cuda_graphs = false;
  GPUOPT_ASSIGN_OR_RETURN(auto session, Session::from_graph(std::move(g), so));
  for (size_t k = 0; k < samples.size(); ++k) {
    auto out = session->run(feeds_of(samples[k], session->inputs()));
    if (!out.ok()) return out.status().with_context(fmt::format("calibration sample {}", samples[k].source));
    for (const auto& [name, t] : *out) {
      auto h = hist.find(name);
      if (h == hist.end() || t.dtype() != DType::F32) continue;
      h->second.add(t.data<float>(), t.numel());
    }
    for (const auto& [name, i] : from_input)
      if (auto h = hist.find(name); h != hist.end() && samples[k].inputs[i].dtype() == DType::F32)
        h->second.add(samples[k].inputs[i].data<float>(), samples[k].inputs[i].numel());
    report(o, "calibrating", k + 1, samples.size());
  }
  return hist;
}

namespace {

Result<std::vector<NamedTensors>> run_samples(const Session& s, const std::vector<Sample>& samples) {
  std::vector<NamedTensors> outs;
  for (const Sample& x : samples) {
    auto r = s.run(feeds_of(x, s.inputs()));
    if (!r.ok()) return r.status().with_context(fmt::format("sample {}", x.source));
    for (auto& [n, t] : *r) t = t.dtype() == DType::F32 ? t : t.cast(DType::F32);
    outs.push_back(std::move(*r));
  }
  return outs;
}

Result<std::vector<NamedTensors>> run_proto(const onnx::ModelProto& m, const std::string& model_dir,
                                            const std::vector<Sample>& samples, const Device& device) {
  const std::string bytes = m.SerializeAsString();
  GPUOPT_ASSIGN_OR_RETURN(Graph g, load_onnx_model_from_bytes(bytes.data(), bytes.size(), model_dir));
  SessionOptions so;
  so.device = device;
  GPUOPT_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), so));
  return run_samples(*s, samples);
}

}  // namespace

double Accuracy::worst_rel_l2() const {
  double w = 0;
  for (const auto& o : outputs) w = std::max(w, o.rel_l2);
  return w;
}

std::optional<double> Accuracy::top1() const {
  for (const auto& o : outputs)
    if (o.top1) return o.top1;
  return std::nullopt;
}

Result<AccuracyTarget> AccuracyTarget::parse(std::string_view spec) {
  AccuracyTarget t;
  const size_t eq = spec.find('=');
  const std::string key(spec.substr(0, eq)), val(eq == std::string_view::npos ? "" : spec.substr(eq + 1));
  char* end = nullptr;
  const double v = std::strtod(val.c_str(), &end);
  const bool num = !val.empty() && *end == '\0' && std::isfinite(v);
  if (key == "rel-l2" && num && v > 0) t.kind = kRelL2;
  else if (key == "top1" && num && v > 0 && v <= 1) t.kind = kTop1;
  else return Status::InvalidArgument("--accuracy-target '{}': expected rel-l2=X (X > 0) or top1=X (0 < X <= 1)", spec);
  t.value = v;
  return t;
}

double AccuracyTarget::loss(const Accuracy& a) const {
  if (kind == kTop1) return 1.0 - a.top1().value_or(0.0);
  return a.worst_rel_l2();
}

bool AccuracyTarget::met(const Accuracy& a) const {
  if (kind == kNone) return true;
  if (kind == kTop1) return a.top1().value_or(0.0) >= value;
  return a.worst_rel_l2() <= value;
}

std::string AccuracyTarget::describe() const {
  if (kind == kTop1) return fmt::format("top-1 agreement >= {:.4g}", value);
  if (kind == kRelL2) return fmt::format("rel-L2 <= {:.4g} on every output", value);
  return "none";
}

Accuracy compare_outputs(const std::vector<NamedTensors>& ref, const std::vector<NamedTensors>& got) {
  Accuracy a;
  a.samples = static_cast<int>(ref.size());
  if (ref.empty()) return a;
  for (size_t o = 0; o < ref[0].size(); ++o) {
    OutputAccuracy r;
    r.name = ref[0][o].first;
    double num = 0, den = 0;
    int64_t rows = 0, agree1 = 0, agree5 = 0;
    bool classifier = true;
    int64_t classes = 0;
    for (size_t k = 0; k < ref.size() && k < got.size(); ++k) {
      const Tensor& f = ref[k][o].second;
      const Tensor& q = got[k][o].second;
      if (f.numel() != q.numel()) continue;
      for (int64_t i = 0; i < f.numel(); ++i) {
        const double d = q.get_f64(i) - f.get_f64(i);
        num += d * d;
        den += f.get_f64(i) * f.get_f64(i);
        r.max_abs = std::max(r.max_abs, std::fabs(d));
      }
      if (f.rank() != 2 || f.dim(1) < 2) {
        classifier = false;
        continue;
      }
      classes = f.dim(1);
      for (int64_t row = 0; row < f.dim(0); ++row) {
        const int64_t base = row * classes;
        auto argmax = [&](const Tensor& t) {
          int64_t b = 0;
          for (int64_t c = 1; c < classes; ++c)
            if (t.get_f64(base + c) > t.get_f64(base + b)) b = c;
          return b;
        };
        const int64_t fa = argmax(f), qa = argmax(q);
        agree1 += fa == qa;
        int64_t above = 0;  // quantized logits larger than the quantized logit of f32's class
        for (int64_t c = 0; c < classes; ++c) above += q.get_f64(base + c) > q.get_f64(base + fa);
        agree5 += above < 5;
        ++rows;
      }
    }
    r.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (classifier && rows > 0) {
      r.top1 = static_cast<double>(agree1) / rows;
      if (classes >= 5) r.top5 = static_cast<double>(agree5) / rows;
    }
    a.outputs.push_back(r);
  }
  return a;
}

Result<std::vector<TensorInfo>> model_inputs(const std::string& model_path) {
  SessionOptions so;
  so.optimize = false;
  GPUOPT_ASSIGN_OR_RETURN(auto s, Session::load(model_path, so));
  return s->inputs();
}

Result<QuantizeResult> quantize_model(const std::string& model_path, const std::vector<Sample>& calib,
                                      const std::vector<Sample>& heldout, const QuantizeOptions& o) {
  GPUOPT_ASSIGN_OR_RETURN(onnx::ModelProto proto, read_model_proto(model_path));
  return quantize_model(proto, model_path, calib, heldout, o);
}

Result<QuantizeResult> quantize_model(const onnx::ModelProto& proto, const std::string& model_path,
                                      const std::vector<Sample>& calib, const std::vector<Sample>& heldout,
                                      const QuantizeOptions& o) {
  QuantizeResult res;
  if (has_quantized_ops(proto))
    return Status::InvalidArgument("model '{}' is already quantized (it has QuantizeLinear/DequantizeLinear or QLinear ops)",
                                   model_path);
  const std::string model_dir = std::filesystem::path(model_path).parent_path().string();
  GPUOPT_ASSIGN_OR_RETURN(Graph graph, import_onnx_model(proto, model_dir.empty() ? "." : model_dir));
  std::map<std::string, DType> dtypes;
  for (const Value& v : graph.values()) dtypes[v.name] = v.info.dtype;
  GPUOPT_ASSIGN_OR_RETURN(res.plan, plan_quantization(proto, dtypes));
  if (res.plan.layers.empty())
    return Status::InvalidArgument("model '{}': nothing to quantize (no Conv, Gemm or MatMul on f32 activations)", model_path);

  if (!o.cache_in.empty()) {
    GPUOPT_ASSIGN_OR_RETURN(res.amax, read_calibration_cache(o.cache_in));
    for (const auto& t : res.plan.tensors)
      if (!res.amax.count(t))
        return Status::InvalidArgument("calibration cache '{}' has no scale for tensor '{}' (made for another model?)",
                                       o.cache_in, t);
  } else {
    if (calib.empty()) return Status::InvalidArgument("no calibration samples");
    GPUOPT_ASSIGN_OR_RETURN(auto hist, collect_histograms(graph, res.plan.tensors, calib, o));
    for (const auto& [name, h] : hist) {
      TensorStat st;
      st.amax = choose_amax(h, o.method, o.params);
      st.max_abs = h.max_abs();
      st.saturation = saturation(h, st.amax);
      st.count = h.total();
      res.amax[name] = st.amax;
      res.stats[name] = st;
    }
    // A MaxPool's output in its input's range (qdq_writer.h: same_range); the saturation reported
    // is the output's own at that range.
    for (const auto& [out, in] : res.plan.same_range) {
      auto h = hist.find(out);
      if (h == hist.end() || !res.amax.count(in)) continue;
      res.amax[out] = res.amax[in];
      res.stats[out].amax = res.amax[in];
      res.stats[out].saturation = saturation(h->second, res.amax[in]);
    }
    res.calibration_samples = static_cast<int>(calib.size());
  }
  res.layers.assign(res.plan.layers.size(), LayerResult{});
  std::vector<bool> keep(res.plan.layers.size(), true);
  GPUOPT_ASSIGN_OR_RETURN(onnx::ModelProto qdq, write_qdq(proto, model_dir, res.plan, res.amax, keep));

  if (!heldout.empty()) {
    SessionOptions so;
    so.device = o.device;
    GPUOPT_ASSIGN_OR_RETURN(auto ref_session, Session::from_graph(graph, so));
    GPUOPT_ASSIGN_OR_RETURN(auto ref, run_samples(*ref_session, heldout));
    auto measure = [&](const onnx::ModelProto& m) -> Result<Accuracy> {
      GPUOPT_ASSIGN_OR_RETURN(auto got, run_proto(m, model_dir, heldout, o.device));
      return compare_outputs(ref, got);
    };
    GPUOPT_ASSIGN_OR_RETURN(Accuracy acc, measure(qdq));
    if (o.target.kind != AccuracyTarget::kNone && !o.target.met(acc)) {
      res.all_int8 = acc;
      // Sensitivity: the loss with each layer alone quantized.
      const size_t n = res.plan.layers.size();
      for (size_t i = 0; i < n; ++i) {
        std::vector<bool> only(n, false);
        only[i] = true;
        GPUOPT_ASSIGN_OR_RETURN(onnx::ModelProto m, write_qdq(proto, model_dir, res.plan, res.amax, only));
        GPUOPT_ASSIGN_OR_RETURN(Accuracy a, measure(m));
        res.layers[i].alone_loss = o.target.loss(a);
        report(o, "sensitivity", i + 1, n);
      }
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return *res.layers[a].alone_loss > *res.layers[b].alone_loss; });
      // Keep the most sensitive in float, one at a time, until the target holds.
      for (size_t k = 0; k < n && !o.target.met(acc); ++k) {
        const size_t i = order[k];
        keep[i] = false;
        res.layers[i].quantized = false;
        res.layers[i].reason = fmt::format("sensitivity rank {}: alone it costs {} {:.3g}", k + 1,
                                           o.target.kind == AccuracyTarget::kTop1 ? "1 - top-1" : "rel-L2",
                                           *res.layers[i].alone_loss);
        GPUOPT_ASSIGN_OR_RETURN(qdq, write_qdq(proto, model_dir, res.plan, res.amax, keep));
        GPUOPT_ASSIGN_OR_RETURN(acc, measure(qdq));
        report(o, "keeping layers in float", k + 1, n);
      }
      if (!o.target.met(acc))
        return Status::FailedPrecondition("--accuracy-target {}: not reached even with every layer in float ({})",
                                          o.target.describe(), o.target.loss(acc));
    }
    res.accuracy = acc;
  }
  res.model = std::make_shared<onnx::ModelProto>(std::move(qdq));
  return res;
}

Result<Graph> quantize_on_inputs(const onnx::ModelProto& proto, const std::string& model_path,
                                 const std::vector<TensorInfo>& inputs, const NamedTensors& feeds, const Device& device) {
  Sample s{{}, "the run's inputs"};
  for (const TensorInfo& in : inputs) {
    auto it = std::find_if(feeds.begin(), feeds.end(), [&](const auto& f) { return f.first == in.name; });
    if (it == feeds.end()) return Status::InvalidArgument("missing input '{}'", in.name);
    s.inputs.push_back(it->second);
  }
  QuantizeOptions o;
  o.method = CalibMethod::kMinMax;
  o.device = device;
  GPUOPT_ASSIGN_OR_RETURN(QuantizeResult r, quantize_model(proto, model_path, {s}, {}, o));
  const std::string bytes = r.model->SerializeAsString();
  const std::string dir = std::filesystem::path(model_path).parent_path().string();
  return load_onnx_model_from_bytes(bytes.data(), bytes.size(), dir.empty() ? "." : dir);
}

}  // namespace gpuopt::quant
