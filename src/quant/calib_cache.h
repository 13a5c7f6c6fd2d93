// The calibration cache: a text file with one line per activation tensor and its int8 scale, so
// a model can be re-quantized (other layers kept in float, another output file) without the data.
//
//   gpuopt-calibration-cache 1
//   # method entropy, 64 samples, model resnet50.onnx
//   input: 0.0210358
//   /layer1/layer1.0/relu/Relu_output_0: 0.0457861
//
// The first line is the format tag; '#' lines are comments; every other line is
// "<tensor name>: <scale>" (the name is everything before the last ": "; scale = amax / 127,
// printed with 9 significant digits so it reads back to the same float).
#pragma once

#include "core/status.h"

#include <map>
#include <string>

namespace gpuopt::quant {

Status write_calibration_cache(const std::string& path, const std::map<std::string, double>& amax, const std::string& comment);
// Returns tensor -> amax (127 * scale).
Result<std::map<std::string, double>> read_calibration_cache(const std::string& path);

}  // namespace gpuopt::quant
