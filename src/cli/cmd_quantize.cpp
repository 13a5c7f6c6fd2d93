// `gpuopt quantize MODEL.onnx --calibration DATA -o OUT.onnx`: post-training int8 quantization
// into a standard QDQ ONNX model; `gpuopt quantize MODEL_DIR --scheme int4 -o OUT_DIR`: a language
// model folder written as GPTQ, AWQ or compressed-tensors FP8 (docs/quantization.md).
#include "cli/command.h"
#include "cli/progress.h"
#include "cli/device_option.h"
#include "quant/calib_cache.h"
#include "quant/report.h"
#include "llm/quantize_llm.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

namespace gpuopt::cli {
namespace {

struct Options {
  std::string model, output, calibration, cache, preprocess, method = "percentile", target, report_dir;
  Device device = Device::cpu();
  double percentile = 99.99;
  int64_t samples = 0;
  int64_t heldout = -1;  // -1: a fifth of the samples when accuracy is measured
  bool json = false;
  // Language-model folders
  std::string scheme = "int4";
  int64_t group_size = 0;
  bool asym = false;
  int64_t calibration_tokens = 512;
};

bool is_model_dir(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) && std::filesystem::exists(std::filesystem::path(p) / "config.json", ec);
}

int run_llm(const Options& o) {
  auto scheme = llm::parse_llm_quant_scheme(o.scheme);
  if (!scheme.ok()) return report_error(scheme.status(), true);
  llm::LlmQuantizeOptions lo;
  lo.scheme = *scheme;
  lo.group_size = o.group_size;
  lo.sym = !o.asym;
  lo.calibration = o.calibration;
  lo.calibration_tokens = o.calibration_tokens;
  lo.progress = progress_bar;
  if (*scheme == llm::LlmQuantScheme::Awq && o.calibration.empty())
    return report_error(Status::InvalidArgument("--scheme awq needs --calibration FILE (text, one sample per line)"), true);
  if (!o.calibration.empty() && (*scheme == llm::LlmQuantScheme::Int4 || *scheme == llm::LlmQuantScheme::Int8))
    return report_error(
        Status::InvalidArgument("--calibration is used by --scheme awq and fp8; --scheme {} rounds to nearest without it",
                                o.scheme),
        true);
  auto r = llm::quantize_llm(o.model, o.output, lo);
  if (!r.ok()) return report_error(r.status());
  if (o.json)
    fmt::print("{}\n", llm::llm_quant_report_json(*r).dump(2));
  else
    fmt::print("{}wrote {}\n", llm::llm_quant_report_text(*r), o.output);
  return kExitOk;
}

int run(const Options& o) {
  if (is_model_dir(o.model)) return run_llm(o);
  auto method = quant::parse_calib_method(o.method);
  if (!method.ok()) return report_error(method.status(), true);
  quant::QuantizeOptions qo;
  qo.method = *method;
  qo.params.percentile = o.percentile;
  qo.device = o.device;
  qo.progress = progress_bar;
  if (!o.target.empty()) {
    auto t = quant::AccuracyTarget::parse(o.target);
    if (!t.ok()) return report_error(t.status(), true);
    qo.target = *t;
  }
  quant::Preprocess pp;
  if (!o.preprocess.empty()) {
    auto p = quant::parse_preprocess(o.preprocess);
    if (!p.ok()) return report_error(p.status(), true);
    pp = *p;
  }
  if (o.calibration.empty() && o.cache.empty())
    return report_error(Status::InvalidArgument("give --calibration DATA (a folder of .npy files or images) or --calibration-cache FILE"), true);
  if (o.calibration.empty() && !o.target.empty())
    return report_error(Status::InvalidArgument("--accuracy-target needs --calibration DATA: its held-out samples measure the accuracy"), true);

  {  // an output folder that does not exist fails now, not after the calibration
    const auto dir = std::filesystem::path(o.output).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return report_error(Status::InvalidArgument("-o '{}': folder '{}' does not exist", o.output, dir.string()));
  }
  std::vector<quant::Sample> calib, heldout;
  if (!o.calibration.empty()) {
    auto inputs = quant::model_inputs(o.model);
    if (!inputs.ok()) return report_error(inputs.status());
    auto data = quant::load_calibration_data(o.calibration, *inputs, pp, o.samples);
    if (!data.ok()) return report_error(data.status());
    calib = std::move(*data);
    const bool measure = !o.target.empty() || !o.report_dir.empty() || o.json;
    int64_t h = o.heldout >= 0 ? o.heldout : (measure && calib.size() >= 2 ? std::max<int64_t>(1, static_cast<int64_t>(calib.size()) / 5) : 0);
    if (!o.target.empty() && h == 0)
      return report_error(Status::InvalidArgument("--accuracy-target needs held-out samples: at least 2 samples, or --heldout N"), true);
    if (h >= static_cast<int64_t>(calib.size()) && o.cache.empty())
      return report_error(Status::InvalidArgument("--heldout {} leaves no calibration samples out of {}", h, calib.size()), true);
    h = std::min<int64_t>(h, static_cast<int64_t>(calib.size()));
    heldout.assign(calib.end() - h, calib.end());
    calib.resize(calib.size() - static_cast<size_t>(h));
  }
  if (o.calibration.empty()) qo.cache_in = o.cache;  // with data, the cache is written afterwards
  auto r = quant::quantize_model(o.model, calib, heldout, qo);
  if (!r.ok()) return report_error(r.status());
  Status st = quant::write_model_proto(*r->model, o.output);
  if (!st.ok()) return report_error(st);
  if (!o.calibration.empty() && !o.cache.empty()) {
    st = quant::write_calibration_cache(o.cache, r->amax,
                                        fmt::format("method {}, {} samples, model {}", o.method, r->calibration_samples, o.model));
    if (!st.ok()) return report_error(st);
  }
  quant::ReportContext c{o.model, o.output, o.method, qo.cache_in, qo.target.describe(), static_cast<int>(heldout.size())};
  if (!o.report_dir.empty()) {
    st = quant::write_report(*r, c, o.report_dir);
    if (!st.ok()) return report_error(st);
  }
  if (o.json) {
    fmt::print("{}\n", quant::report_json(*r, c).dump(2));
  } else {
    fmt::print("{}", quant::report_text(*r, c));
    fmt::print("wrote {}{}{}\n", o.output, o.calibration.empty() || o.cache.empty() ? "" : fmt::format(", calibration cache {}", o.cache),
               o.report_dir.empty() ? "" : fmt::format(", report in {}/ (report.txt, report.json, layers.svg)", o.report_dir));
  }
  return kExitOk;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("quantize", "Calibrate a model on sample data and write an int8 QDQ ONNX model");
  cmd->add_option("model", o->model, "ONNX model file (f32), or a language model folder (config.json + safetensors)")
      ->required();
  cmd->add_option("-o,--output", o->output, "Quantized ONNX model to write (a folder for a language model)")->required();
  cmd->add_option("--calibration", o->calibration,
                  "Folder of .npy files (one per sample, one stacked <input>.npy per input, or one subfolder per sample) or "
                  "images; for a language model, a text file (one sample per line: --scheme awq, or fp8 static activation scales)");
  cmd->add_option("--scheme", o->scheme,
                  "Language model: int4 (GPTQ, group 128, default), int8 (GPTQ, per channel), awq (int4 with "
                  "activation-aware scales) or fp8 (compressed-tensors e4m3, per channel; activations per token, or per "
                  "tensor from --calibration)")
      ->check(CLI::IsMember({"int8", "int4", "awq", "fp8"}));
  cmd->add_option("--group-size", o->group_size, "Language model: input channels per scale (-1: whole row; default 128 for "
                                                 "int4/awq, -1 for int8)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 20));
  cmd->add_flag("--asym", o->asym, "Language model, int4/int8: asymmetric (zero point per group) instead of symmetric");
  cmd->add_option("--calibration-tokens", o->calibration_tokens,
                  "Language model, awq: run at most N tokens of the calibration text (default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--calibration-cache", o->cache,
                  "Scales file: written after calibrating with --calibration, read instead of data without it");
  cmd->add_option("--method", o->method, "minmax, percentile (default), entropy or mse")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy", "mse"}));
  cmd->add_option("--percentile", o->percentile, "Percentile of |x| kept by --method percentile (default 99.99)")
      ->check(CLI::Range(50.0, 100.0));
  cmd->add_option("--samples", o->samples, "Use at most N samples from DATA (default all)")->check(CLI::PositiveNumber);
  cmd->add_option("--heldout", o->heldout,
                  "Samples kept out of calibration to measure accuracy (default a fifth with --accuracy-target, --report or --json)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--preprocess", o->preprocess,
                  "Images: 'imagenet' or resize=256,crop=224,scale=0.0039216,mean=a/b/c,std=a/b/c,layout=nchw|nhwc,order=rgb|bgr");
  cmd->add_option("--accuracy-target", o->target,
                  "rel-l2=X or top1=X on the held-out samples: keep the most sensitive layers in float until it holds");
  cmd->add_option("--report", o->report_dir, "Write report.txt, report.json and layers.svg into DIR");
  add_device_option(cmd, &o->device, "Backend for the calibration and accuracy runs: cpu (default), cuda or cuda:N");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(45, setup);

}  // namespace
}  // namespace gpuopt::cli
