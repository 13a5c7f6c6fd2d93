// Post-training int8 quantization of an ONNX model (gpuopt quantize, run --precision int8):
//
//   calibration samples ─► f32 run on the reference (or CUDA) backend with every planned
//   activation as an extra output ─► histograms ─► amax per tensor (calibrate.h) ─► QDQ model
//   (qdq_writer.h) ─► [--accuracy-target: held-out accuracy, per-layer sensitivity, layers kept
//   in float until the target holds] ─► report (report.h).
#pragma once

#include "core/status.h"
#include "gpuopt/session.h"
#include "quant/calibrate.h"
#include "quant/dataset.h"
#include "quant/qdq_writer.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {
class Graph;
}

namespace gpuopt::quant {

// Accuracy of a quantized model's outputs against the f32 model's on the same samples.
struct OutputAccuracy {
  std::string name;
  double rel_l2 = 0;   // ||q - f|| / ||f|| over all samples
  double max_abs = 0;  // max |q - f|
  // Classifier outputs ([N, C], C >= 2): share of rows whose argmax agrees; top-5: share of
  // rows where the f32 argmax is among the quantized model's five largest (C >= 5).
  std::optional<double> top1, top5;
};
struct Accuracy {
  std::vector<OutputAccuracy> outputs;
  int samples = 0;
  double worst_rel_l2() const;
  std::optional<double> top1() const;  // the first classifier output's
};

struct AccuracyTarget {
  enum Kind { kNone, kRelL2, kTop1 } kind = kNone;
  double value = 0;
  // "rel-l2=0.02" (every output's rel-L2 at most 0.02) or "top1=0.99" (top-1 agreement at least 99%).
  static Result<AccuracyTarget> parse(std::string_view spec);
  bool met(const Accuracy& a) const;
  double loss(const Accuracy& a) const;  // smaller is better: rel-L2, or 1 - top-1 agreement
  std::string describe() const;
};

struct TensorStat {
  double amax = 0, max_abs = 0, saturation = 0;  // saturation: share of values beyond amax
  uint64_t count = 0;
};

struct QuantizeOptions {
  CalibMethod method = CalibMethod::kPercentile;
  CalibParams params;
  Device device = Device::cpu();       // backend that runs the calibration and evaluation runs
  std::string cache_in;                // --calibration-cache: read scales from here, no data needed
  AccuracyTarget target;
  // Called as work advances: stage ("calibrating", "sensitivity", ...), done, total.
  std::function<void(std::string_view, size_t, size_t)> progress;
};

struct LayerResult {
  bool quantized = true;
  std::optional<double> alone_loss;  // the target's loss with this layer alone quantized
  std::string reason;                // why it stayed in float
};

struct QuantizeResult {
  std::shared_ptr<onnx::ModelProto> model;  // the QDQ model
  QuantPlan plan;
  std::map<std::string, double> amax;
  std::map<std::string, TensorStat> stats;  // empty when the scales came from a cache
  std::vector<LayerResult> layers;          // parallel to plan.layers
  std::optional<Accuracy> accuracy;         // final model on the held-out samples
  std::optional<Accuracy> all_int8;         // every layer quantized (when a target was searched)
  int calibration_samples = 0;
};

// Quantizes `model_path`. `calib` feeds the histograms (unused with opts.cache_in); `heldout`,
// when not empty, measures accuracy and drives opts.target.
Result<QuantizeResult> quantize_model(const std::string& model_path, const std::vector<Sample>& calib,
                                      const std::vector<Sample>& heldout, const QuantizeOptions& opts);
// The same on a model already read from `model_path` (its folder holds any external data).
Result<QuantizeResult> quantize_model(const onnx::ModelProto& proto, const std::string& model_path,
                                      const std::vector<Sample>& calib, const std::vector<Sample>& heldout,
                                      const QuantizeOptions& opts);

// gpuopt run --precision int8 on a float model: calibrates (minmax) on the run's own inputs
// and returns the QDQ model as a graph. The accuracy is unknown: the caller says so.
// `proto`: the model read from `model_path`; `inputs`: its input descriptions (Session::inputs()).
Result<Graph> quantize_on_inputs(const onnx::ModelProto& proto, const std::string& model_path,
                                 const std::vector<TensorInfo>& inputs, const NamedTensors& feeds, const Device& device);

// f32 histograms of `tensors` (value names of `graph`), from runs of `graph` as it is (no
// passes) with them as extra outputs; graph inputs are read from the samples.
Result<std::map<std::string, Histogram>> collect_histograms(const Graph& graph, const std::vector<std::string>& tensors,
                                                            const std::vector<Sample>& samples, const QuantizeOptions& o);

// The model's inputs as gpuopt sees them (names, dtypes, shapes), to read calibration data.
Result<std::vector<TensorInfo>> model_inputs(const std::string& model_path);

// Compares quantized outputs with reference outputs, sample by sample (same order and names).
Accuracy compare_outputs(const std::vector<NamedTensors>& ref, const std::vector<NamedTensors>& got);

}  // namespace gpuopt::quant
