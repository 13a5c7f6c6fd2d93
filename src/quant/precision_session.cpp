// load_at_precision (precision_session.h): the model file read once, calibrated when it must be.
#include "quant/precision_session.h"

#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "quant/fp8.h"
#include "quant/qdq_writer.h"
#include "quant/quantizer.h"

#include <chrono>
#include <filesystem>

namespace gpuopt::quant {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<PrecisionSession> load_at_precision(const std::string& model_path, const SessionOptions& options,
                                           const FeedsFn& feeds,
                                           const std::function<void(std::string_view precision)>& on_calibrate) {
  PrecisionSession ps;
  ps.ran_as = options.precision;
  const auto t0 = std::chrono::steady_clock::now();
  double feeds_s = 0;  // time in `feeds` (reading .npy files): not the load's
  auto make_feeds = [&](const Session& s) -> Status {
    const auto f0 = std::chrono::steady_clock::now();
    GPUOPT_ASSIGN_OR_RETURN(ps.feeds, feeds(s));
    feeds_s += seconds_since(f0);
    return Status::Ok();
  };
  const bool quantized_precision = options.precision == "int8" || options.precision == "fp8";
  std::optional<onnx::ModelProto> proto;
  if (quantized_precision) {
    GPUOPT_ASSIGN_OR_RETURN(proto, read_model_proto(model_path));
    ps.calibrated = !has_quantized_ops(*proto);
    if (!ps.calibrated && options.precision == "fp8")
      return Status::InvalidArgument("--precision fp8 takes a float model; {} has QuantizeLinear/DequantizeLinear "
                                     "nodes (run it with --precision int8)", model_path);
  }
  if (!ps.calibrated) {  // as Session::load (the plan cache keys on the file)
    GPUOPT_ASSIGN_OR_RETURN(ps.session, Session::load(model_path, options));
    GPUOPT_RETURN_IF_ERROR(make_feeds(*ps.session));
    ps.load_s = seconds_since(t0) - feeds_s;
    return ps;
  }
  // A float model at int8/fp8: its f32 session describes the inputs the feeds are made for, then
  // the calibration on them, then the session of the calibrated graph. The proto read above is
  // the only read of the file (external data aside).
  const std::string dir = std::filesystem::path(model_path).parent_path().string();
  GPUOPT_ASSIGN_OR_RETURN(Graph graph, import_onnx_model(*proto, dir.empty() ? "." : dir));
  SessionOptions so = options;
  so.precision = "fp32";
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Session> f32, Session::from_graph(graph, so));
  GPUOPT_RETURN_IF_ERROR(make_feeds(*f32));
  if (on_calibrate) on_calibrate(options.precision);
  so.precision = options.precision;
  if (options.precision == "fp8") {
    GPUOPT_ASSIGN_OR_RETURN(Fp8Model fm, fp8_on_graph(std::move(graph), ps.feeds, options.device));
    ps.fp8 = Fp8Summary{fm.rewritten, fm.chained, fm.shared, fm.normed, std::move(fm.kept)};
    // No GEMM qualified: the session pipeline refuses fp8 without Fp8Gemm nodes; the float model
    // then runs as it would at fp8 otherwise (fp16 on the GPU, f32 on the CPU).
    if (fm.rewritten == 0) so.precision = options.device.is_cuda() ? "fp16" : "fp32";
    GPUOPT_ASSIGN_OR_RETURN(ps.session, Session::from_graph(std::move(fm.graph), so));
  } else {
    GPUOPT_ASSIGN_OR_RETURN(Graph q, quantize_on_inputs(*proto, model_path, f32->inputs(), ps.feeds, options.device));
    GPUOPT_ASSIGN_OR_RETURN(ps.session, Session::from_graph(std::move(q), so));
  }
  ps.ran_as = so.precision;
  ps.load_s = seconds_since(t0) - feeds_s;
  return ps;
}

}  // namespace gpuopt::quant
