// FP8 e4m3 for a float model (gpuopt run --precision fp8): the f32 graph after the default passes,
// calibrated on the given inputs (minmax: the activation scale is amax / 448, as the weights'),
// its GEMMs with constant weights rewritten to Fp8Gemm (passes/fp8.h). Session::from_graph with
// precision "fp8" runs the result: Fp8Gemm on FP8 tensor cores, the float rest in fp16 on the
// GPU (f32 on the CPU reference). The accuracy is unknown without real data: the caller says so.
//
//   GPUOPT_ASSIGN_OR_RETURN(quant::Fp8Model fm, quant::fp8_on_graph(std::move(graph), feeds, device));
#pragma once

#include "core/status.h"
#include "gpuopt/session.h"
#include "ir/graph.h"

#include <string>
#include <vector>

namespace gpuopt::quant {

struct Fp8Model {
  Graph graph;
  int rewritten = 0;               // GEMMs now Fp8Gemm
  int chained = 0;                 // of them, writing the next one's e4m3 input (passes/fp8.h)
  int shared = 0;                  // of them, reading a sibling's e4m3 copy of their input
  std::vector<std::string> kept;   // GEMMs with a constant weight left in float, with the reason
  int normed = 0;                  // SkipLayerNormalizations writing their readers' e4m3 input
};

// `graph`: the model as imported (load_onnx_model / import_onnx_model).
Result<Fp8Model> fp8_on_graph(Graph graph, const NamedTensors& feeds, const Device& device);

}  // namespace gpuopt::quant
