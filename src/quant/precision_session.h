// A Session at any precision from a model file, read once: `gpuopt run --precision int8|fp8` on
// a float model calibrates (minmax) on the run's own inputs, made by `feeds` from the float
// session's input descriptions, and runs the calibrated graph (int8: Q/DQ pairs, quantizer.h;
// fp8: Fp8Gemm nodes, fp8.h). A model already quantized, or any other precision, loads as
// Session::load does (plan cache included). The accuracy of a calibration on one run's inputs is
// unknown: `on_calibrate` is called first so the caller can say so.
//
//   SessionOptions so; so.precision = "int8";
//   GPUOPT_ASSIGN_OR_RETURN(quant::PrecisionSession ps, quant::load_at_precision("m.onnx", so,
//       [&](const Session& s) { return profile::random_feeds(s, 1, {}, 0); }, nullptr));
//   auto outs = ps.session->run(ps.feeds);
#pragma once

#include "core/status.h"
#include "gpuopt/session.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::quant {

struct Fp8Summary {  // what fp8_on_graph rewrote (fp8.h Fp8Model, without the graph)
  int rewritten = 0, chained = 0, shared = 0, normed = 0;
  std::vector<std::string> kept;
};

struct PrecisionSession {
  std::unique_ptr<Session> session;  // the one that runs
  NamedTensors feeds;                // what `feeds` made
  bool calibrated = false;           // the scales came from `feeds`
  std::string ran_as;                // the session's precision (fp8 with no GEMM rewritten runs as fp16/fp32)
  std::optional<Fp8Summary> fp8;     // fp8 calibration: what it rewrote
  double load_s = 0;                 // reading, compiling and calibrating; not the time in `feeds`
};

using FeedsFn = std::function<Result<NamedTensors>(const Session&)>;

// "--precision fp8 takes a float model; M has QuantizeLinear/DequantizeLinear nodes (...)" is an
// InvalidArgument whose message starts with "--precision": a usage error for the CLI.
Result<PrecisionSession> load_at_precision(const std::string& model_path, const SessionOptions& options,
                                           const FeedsFn& feeds,
                                           const std::function<void(std::string_view precision)>& on_calibrate);

}  // namespace gpuopt::quant
