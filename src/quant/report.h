// The quantization report (gpuopt quantize, --report DIR, --json): per-output accuracy against
// f32, top-1/top-5 agreement for classifiers, and per layer its int8 scale, saturation,
// sensitivity and whether it stayed in float (and why).
#pragma once

#include "quant/quantizer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpuopt::quant {

struct ReportContext {
  std::string model, output, method, cache;
  std::string target;  // AccuracyTarget::describe()
  int heldout_samples = 0;
};

nlohmann::json report_json(const QuantizeResult& r, const ReportContext& c);
std::string report_text(const QuantizeResult& r, const ReportContext& c);
// Bars per layer: saturation (share of calibration values clipped), and where measured, the
// accuracy loss with that layer alone quantized; layers kept in float are marked.
std::string report_svg(const QuantizeResult& r, const ReportContext& c);
// Writes DIR/report.txt, DIR/report.json and DIR/layers.svg.
Status write_report(const QuantizeResult& r, const ReportContext& c, const std::string& dir);

}  // namespace gpuopt::quant
