// The activations a convolution's epilogue applies on the GPU: FusedConv / NhwcFusedConv's
// `activation` attribute. fuse_conv_activation writes only these, layout_nhwc lets only these
// into channels-last regions, and the CUDA kernels (cuda/conv_epilogue.cu, cuda/depthwise.cu)
// apply them in the pass that writes the conv's output. ONNX Runtime's FusedConv knows Relu (and
// LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, which the CPU reference also runs); "HardSwish"
// (MobileNetV3) and "Swish" (x * sigmoid(x), SiLU: EfficientNet) are gpuopt's additions.
//
// NhwcFusedConv's `input_activation` (the same names) is a prologue: Y = conv(act(X)), the
// activation applied to every in-bounds input value as it is read (padding stays 0: it pads the
// activated tensor). The fuse_dw_prologue pass writes it on depthwise convs, moving the activation
// of the conv that produces X into the reader (src/passes/fuse_dw_prologue.h).
#pragma once

#include <algorithm>
#include <cmath>
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

// NhwcFusedConv's prologue attribute (above); absent or "" = none.
inline constexpr std::string_view kConvInputActivation = "input_activation";

// The CPU reference's formulas (the Relu, HardSwish and Swish kernels'), in double.
inline double conv_act_apply(ConvAct a, double v) {
  switch (a) {
    case ConvAct::kRelu: return v > 0 ? v : 0.0;
    case ConvAct::kHardSwish: return v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5));
    case ConvAct::kSwish: return v / (1.0 + std::exp(-v));
    case ConvAct::kNone: break;
  }
  return v;
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
