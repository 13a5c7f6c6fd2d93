// Resize / Upsample on the GPU: nearest (four rounding modes), linear and cubic (cubic_coeff_a),
// antialias for linear and cubic, exclude_outside, every coordinate_transformation_mode, any
// rank. The host works out each axis's scale and roi exactly as the CPU reference does; the
// kernel computes each output element's taps in double (the same formulas, products kept
// unfused) and sums them in double axis by axis, in the reference's order.
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

enum class ResizeCtm : uint8_t {
  kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCropAndResize, kTfHalfPixelForNn,
};
enum class ResizeNearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class ResizeMode : uint8_t { kNearest, kLinear, kCubic };

struct ResizeDesc {
  int rank = 0;
  int64_t numel = 0;  // output elements
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  double scale[kMaxRank] = {};
  double roi_start[kMaxRank] = {};
  double roi_end[kMaxRank] = {};
  bool resized[kMaxRank] = {};  // false: the axis is copied through (identity)
  int order[kMaxRank] = {};      // the resized axes in the order the CPU reference processes them
  int num_order = 0;
  ResizeCtm ctm = ResizeCtm::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  ResizeMode mode = ResizeMode::kNearest;
  double cubic_a = -0.75;        // cubic_coeff_a
  bool antialias = false;        // linear and cubic: the filter widens by 1/scale when downsampling
  bool exclude_outside = false;  // taps outside the input get weight 0, the rest renormalized
  double extrapolation = 0.0;
};

// dt: f32, f16, bf16, u8, i8 (integers round half to even and saturate).
Status launch_resize(DType dt, const void* x, void* y, const ResizeDesc& d, cudaStream_t s);

}  // namespace gpuopt::cuda
