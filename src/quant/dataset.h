// Calibration data: a folder of .npy files or of images, read into samples in model-input order.
//
// Layouts of DATA (docs/quantization.md), tried in this order:
//  1. images (.png .jpg .jpeg .bmp .ppm .pgm), with --preprocess: one sample each, decoded by
//     the ImageDecoder op, resized (shorter side), centre-cropped, scaled, mean/std-normalized,
//     NCHW (or NHWC) f32 with a batch dim of 1;
//  2. one subfolder per sample holding <input>.npy for every model input;
//  3. <input>.npy for every model input: stacked arrays, sample k is row k of each;
//  4. a one-input model: every .npy file is one sample.
// Every tensor is checked against the input it feeds (dtype, rank, fixed dims, finite values);
// a failure is one line naming the file.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/session.h"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::quant {

struct Preprocess {
  bool enabled = false;
  int64_t resize = 256;  // shorter side after resizing (bilinear); 0: no resize
  int64_t crop = 224;    // centre crop (square); 0: no crop
  float scale = 1.0f / 255.0f;  // pixel value multiplier before mean/std
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  bool nhwc = false;
  bool bgr = false;
};

// "imagenet" (the defaults above) or comma-separated key=value: resize=256, crop=224,
// scale=0.00392, mean=0.485/0.456/0.406, std=0.229/0.224/0.225, layout=nchw|nhwc, order=rgb|bgr.
Result<Preprocess> parse_preprocess(std::string_view spec);

struct Sample {
  std::vector<Tensor> inputs;  // model-input order
  std::string source;          // file or folder it came from (for messages)
};

// Reads at most `max_samples` samples (0: all) from `dir` for a model with `inputs`.
Result<std::vector<Sample>> load_calibration_data(const std::string& dir, const std::vector<TensorInfo>& inputs,
                                                  const Preprocess& pp, int64_t max_samples);
// Checks one tensor against the input it feeds; `file` names it in the error. A tensor one rank
// short of the input gets a leading batch dim of 1.
Result<Tensor> check_sample_tensor(Tensor t, const TensorInfo& in, const std::string& file);

}  // namespace gpuopt::quant
