// The ONNX forms of Resize and Upsample (ops_versions.inc gives each its opset range); the CPU
// kernel (resize.cpp) and the CUDA plan (cuda/resize_plan.h) take the form, never the opset.
#pragma once

namespace gpuopt {

enum class ResizeForm {
  kScalesAttr,   // Upsample-7: X only, `scales` attribute; asymmetric, nearest rounds down
  kScalesInput,  // Upsample-9, Resize-10: X, scales; asymmetric, nearest rounds down
  kFull,         // Resize-11+: X, roi, scales, sizes; every coordinate mode and attribute
};

}  // namespace gpuopt
