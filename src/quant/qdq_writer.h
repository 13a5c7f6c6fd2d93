// The QDQ model: which nodes of an ONNX model get int8 QuantizeLinear/DequantizeLinear pairs
// (the plan), and the rewritten ModelProto (the writer). The recipe follows TensorRT's and ONNX
// Runtime's QDQ placement (docs/quantization.md):
//  - Conv, Gemm, MatMul with an initializer weight: the activation input gets a per-tensor
//    Q/DQ pair, the weight is stored as int8 with a per-output-channel DequantizeLinear
//    (symmetric, zero point 0; per tensor below opset 13, where DequantizeLinear has no axis);
//  - MatMul of two activations (attention's QK^T and PV): both inputs per tensor;
//  - MaxPool, AveragePool, GlobalAveragePool: the input; a MaxPool's output, where a layer
//    quantizes it, takes its input's range (`same_range`: a maximum never leaves its inputs' range,
//    ONNX Runtime's recipe), so the pooled tensor's re-quantize is the identity (qdq_requant.cpp);
//  - residual Add (two activation inputs, its output read by a Conv or pool, directly or through
//    a Relu): both inputs, so the add can run on int8 data next to the convolution.
// Biases stay f32. An activation read by several quantized nodes gets one shared Q/DQ pair;
// nodes kept in float read the original tensor.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace gpuopt::quant {

struct QuantLayer {
  int node = -1;                        // index in the model's graph.node
  std::string name;                     // node name (or its first output when unnamed)
  std::string op_type;
  std::vector<std::string> activations;  // inputs that get a per-tensor Q/DQ pair
  std::string weight;                   // initializer quantized per channel ("" none)
  int weight_axis = 0;                  // output-channel axis of the weight
};

struct QuantPlan {
  std::vector<QuantLayer> layers;
  std::vector<std::string> tensors;     // every activation some layer quantizes, in graph order
  std::vector<std::string> notes;       // nodes of a quantizable type that were left alone, and why
  std::vector<std::pair<std::string, std::string>> same_range;  // (MaxPool output, its input), graph order
  bool per_channel = true;              // opset >= 13
};

// `dtypes`: the f32 activations are the only ones quantized (name -> dtype from shape inference).
Result<QuantPlan> plan_quantization(const onnx::ModelProto& model, const std::map<std::string, DType>& dtypes);

// Writes the QDQ model: layers with keep[i] true get their Q/DQ pairs, the others stay float.
// `amax` gives every activation's clipping range (scale = amax / 127); weights are read from
// the model (external data relative to `model_dir`) and quantized here. External float
// initializers that remain are written inline.
Result<onnx::ModelProto> write_qdq(const onnx::ModelProto& model, const std::string& model_dir, const QuantPlan& plan,
                                   const std::map<std::string, double>& amax, const std::vector<bool>& keep);

// Per-output-channel scales (max |w| / 127, 1 for an all-zero channel) of a weight tensor.
std::vector<float> channel_scales(const float* w, const std::vector<int64_t>& shape, int axis);

// Loads an ONNX file into a ModelProto (one clear error on a bad file).
Result<onnx::ModelProto> read_model_proto(const std::string& path);
Status write_model_proto(const onnx::ModelProto& model, const std::string& path);
// True when the model already holds QuantizeLinear/DequantizeLinear or QLinear*/Integer ops.
bool has_quantized_ops(const onnx::ModelProto& model);

}  // namespace gpuopt::quant
