// The activations a convolution's epilogue applies on the GPU: FusedConv / NhwcFusedConv's
// `activation` attribute. fuse_conv_activation writes only these, layout_nhwc lets only these
// into channels-last regions, and the CUDA kernels (cuda/conv_epilogue.cu, cuda/depthwise.cu)
// apply them in the pass that writes the conv's output. ONNX Runtime's FusedConv knows Relu (and
// LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, which the CPU reference also runs); "HardSwish"
// (MobileNetV3) and "Swish" (x * sigmoid(x), SiLU: EfficientNet) are gpuopt's additions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuopt {

enum class ConvAct : uint8_t { kNone, kRelu, kHardSwish, kSwish };

inline std::optional<ConvAct> conv_act_from_name(std::string_view name) {
  if (name.empty()) return ConvAct::kNone;
  if (name == "Relu") return ConvAct::kRelu;
  if (name == "HardSwish") return ConvAct::kHardSwish;
  if (name == "Swish") return ConvAct::kSwish;
  return std::nullopt;
}

inline std::string_view conv_act_name(ConvAct a) {
  switch (a) {
    case ConvAct::kRelu: return "Relu";
    case ConvAct::kHardSwish: return "HardSwish";
    case ConvAct::kSwish: return "Swish";
    case ConvAct::kNone: break;
  }
  return "";
}

}  // namespace gpuopt
