// The CUDA Resize arithmetic (resize_math.h, the same code the kernel runs) evaluated on the host
// with the plan of make_resize_desc, against the CPU reference: every coordinate mode, the four
// nearest modes, linear and cubic (cubic_coeff_a), antialias, scales and sizes, axes,
// keep_aspect_ratio_policy, exclude_outside, crop with extrapolation, Resize-10 and Upsample.
// Needs no GPU.
#include "ops/resize/cuda/resize_math.h"
#include "ops/resize/cuda/resize_plan.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

// The case table below leaves trailing members at their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpuopt::cuda {
namespace {

struct ResizeCase {
  std::string name;
  Op op = Op::Resize;
  int opset = 19;
  Shape in;
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
  std::vector<std::pair<std::string, std::string>> str_attrs;
  std::vector<std::pair<std::string, int64_t>> int_attrs;
  std::vector<int64_t> axes;
  float extrapolation = 0.0f;
  float cubic_a = -0.75f;
};

Attribute str_attr(const std::string& v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = v;
  return a;
}

Tensor f32_vector(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector<float>(DType::F32, {static_cast<int64_t>(v.size())}, f);
}

void check(const ResizeCase& c) {
  SCOPED_TRACE(c.name);
  Node node;
  node.op = c.op;
  node.op_type = c.op == Op::Resize ? "Resize" : "Upsample";
  node.name = "resize";
  for (const auto& [k, v] : c.str_attrs) node.attrs[k] = str_attr(v);
  for (const auto& [k, v] : c.int_attrs) {
    Attribute a;
    a.i = v;
    node.attrs[k] = a;
  }
  if (!c.axes.empty()) {
    Attribute a;
    a.kind = Attribute::Kind::kInts;
    a.ints = c.axes;
    node.attrs["axes"] = a;
  }
  if (c.extrapolation != 0.0f) {
    Attribute a;
    a.kind = Attribute::Kind::kFloat;
    a.f = c.extrapolation;
    node.attrs["extrapolation_value"] = a;
  }
  if (c.cubic_a != -0.75f) {
    Attribute a;
    a.kind = Attribute::Kind::kFloat;
    a.f = c.cubic_a;
    node.attrs["cubic_coeff_a"] = a;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor x = Tensor::empty(DType::F32, c.in);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  Tensor roi, scales, sizes;
  std::vector<const Tensor*> inputs{&x};
  const bool legacy = c.op == Op::Upsample || c.opset < 11;
  if (legacy) {
    scales = f32_vector(c.scales);
    inputs.push_back(&scales);
  } else {
    if (!c.roi.empty()) roi = f32_vector(c.roi);
    if (!c.scales.empty()) scales = f32_vector(c.scales);
    if (!c.sizes.empty()) sizes = Tensor::from_vector<int64_t>(DType::I64, {static_cast<int64_t>(c.sizes.size())}, c.sizes);
    inputs.push_back(c.roi.empty() ? nullptr : &roi);
    inputs.push_back(c.scales.empty() ? nullptr : &scales);
    inputs.push_back(c.sizes.empty() ? nullptr : &sizes);
  }
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<ValueId>(i) : kNoValue);
  node.outputs.push_back(static_cast<ValueId>(inputs.size()));
  auto ref = eval_node(node, inputs, c.opset);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const Tensor& want = (*ref)[0];
  // The form the opset picks (ir/ops_versions.inc); the cases give Upsample-9 / Resize-10 scales as an input.
  const ResizeForm form = legacy ? ResizeForm::kScalesInput : ResizeForm::kFull;
  auto d = make_resize_desc(node, form, x.shape(), want.shape(), inputs);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->numel, want.numel());
  const float* xp = x.data<float>();
  int mismatches = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double v = resize_point(*d, i, [xp](int64_t off) { return static_cast<double>(xp[off]); });
    const float got = static_cast<float>(v), w = want.data<float>()[i];
    if (std::fabs(got - w) > 1e-6f * (1.f + std::fabs(w)) && ++mismatches <= 5)
      ADD_FAILURE() << "element " << i << ": got " << got << " want " << w;
  }
  EXPECT_EQ(mismatches, 0);

  // u8: results on .5 are common (integer inputs, weights like 1/2 and 1/4) and the rounding
  // order decides them, so the kernel's sums must be the reference's exactly.
  Tensor xq = Tensor::empty(DType::U8, c.in);
  std::uniform_int_distribution<int> q(0, 255);
  for (int64_t i = 0; i < xq.numel(); ++i) xq.data<uint8_t>()[i] = static_cast<uint8_t>(q(rng));
  inputs[0] = &xq;
  auto ref_q = eval_node(node, inputs, c.opset);
  ASSERT_TRUE(ref_q.ok()) << ref_q.status().to_string();
  const uint8_t* xqp = xq.data<uint8_t>();
  mismatches = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double v = resize_point(*d, i, [xqp](int64_t off) { return static_cast<double>(xqp[off]); });
    v = std::nearbyint(v);
    const int got = std::isnan(v) ? 0 : static_cast<int>(std::clamp(v, 0.0, 255.0));
    const int w = (*ref_q)[0].data<uint8_t>()[i];
    if (got != w && ++mismatches <= 5) ADD_FAILURE() << c.name << " u8 element " << i << ": got " << got << " want " << w;
  }
  EXPECT_EQ(mismatches, 0) << c.name;
}

TEST(CudaResizePlan, MatchesCpuReferenceOnTheHost) {
  using SA = std::vector<std::pair<std::string, std::string>>;
  const ResizeCase cases[] = {
      {"nearest half_pixel up", Op::Resize, 19, {2, 3, 5, 7}, {}, {1, 1, 2, 3}, {}, SA{{"mode", "nearest"}}},
      {"nearest asymmetric floor down", Op::Resize, 19, {1, 2, 16, 15}, {}, {1, 1, 0.5, 0.6}, {},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}}},
      {"nearest align_corners prefer_ceil sizes", Op::Resize, 19, {1, 3, 4, 5}, {}, {}, {1, 3, 9, 11},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "align_corners"}, {"nearest_mode", "round_prefer_ceil"}}},
      {"nearest tf_half_pixel_for_nn ceil", Op::Resize, 19, {2, 2, 7, 6}, {}, {1, 1, 1.5, 2.5}, {},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "tf_half_pixel_for_nn"}, {"nearest_mode", "ceil"}}},
      {"nearest pytorch_half_pixel prefer_floor down", Op::Resize, 19, {1, 1, 9, 10}, {}, {1, 1, 0.5, 0.5}, {},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}}},
      {"linear half_pixel up", Op::Resize, 19, {2, 3, 8, 9}, {}, {1, 1, 2, 2}, {}, SA{{"mode", "linear"}}},
      {"linear align_corners sizes", Op::Resize, 19, {2, 3, 8, 9}, {}, {}, {2, 3, 17, 5},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}},
      {"linear pytorch_half_pixel to 1", Op::Resize, 19, {1, 2, 4, 5}, {}, {}, {1, 2, 1, 7},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}}},
      {"linear half_pixel_symmetric", Op::Resize, 19, {1, 3, 10, 10}, {}, {1, 1, 1.7, 0.8}, {},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "half_pixel_symmetric"}}},
      {"linear asymmetric N-D", Op::Resize, 19, {2, 5, 6, 7}, {}, {2, 1, 1.5, 0.5}, {},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "asymmetric"}}},
      {"linear 3-D", Op::Resize, 19, {3, 20, 9}, {}, {1, 0.35, 3}, {}, SA{{"mode", "linear"}}},
      {"linear crop extrapolation", Op::Resize, 19, {1, 1, 5, 5}, {0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8}, {}, {1, 1, 6, 6},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "tf_crop_and_resize"}}, {}, {}, 10.0f},
      {"nearest crop", Op::Resize, 19, {1, 2, 6, 7}, {0, 0, 0.1, 0.25, 1, 1, 0.9, 1.1}, {}, {1, 2, 4, 9},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "tf_crop_and_resize"}}},
      {"linear exclude_outside", Op::Resize, 19, {1, 2, 6, 6}, {}, {1, 1, 2, 2}, {}, SA{{"mode", "linear"}},
       {{"exclude_outside", 1}}},
      {"linear axes", Op::Resize, 19, {2, 3, 8, 9}, {}, {2, 0.5}, {}, SA{{"mode", "linear"}}, {}, {2, 3}},
      {"nearest not_larger", Op::Resize, 19, {2, 3, 8, 12}, {}, {}, {10, 10},
       SA{{"mode", "nearest"}, {"keep_aspect_ratio_policy", "not_larger"}}, {}, {2, 3}},
      {"linear not_smaller negative axes", Op::Resize, 19, {2, 3, 8, 12}, {}, {}, {5, 20},
       SA{{"mode", "linear"}, {"keep_aspect_ratio_policy", "not_smaller"}}, {}, {-1, -2}},
      {"resize-10 linear", Op::Resize, 10, {2, 3, 5, 7}, {}, {1, 1, 2, 1.5}, {}, SA{{"mode", "linear"}}},
      {"upsample-9 nearest", Op::Upsample, 9, {2, 3, 5, 7}, {}, {1, 1, 2, 3}, {}, SA{{"mode", "nearest"}}},
      {"nearest exclude_outside", Op::Resize, 19, {1, 2, 6, 7}, {}, {1, 1, 0.6, 1.7}, {},
       SA{{"mode", "nearest"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}}, {{"exclude_outside", 1}}},
  };
  for (const ResizeCase& c : cases) check(c);
}

// Cubic (every coordinate mode, cubic_coeff_a, exclude_outside, crop) and antialias (linear and
// cubic, down and up, with exclude_outside and axes): the taps, their order and the weights'
// normalizations must be the reference's, so u8 results agree exactly.
TEST(CudaResizePlan, CubicAndAntialiasMatchCpuReference) {
  using SA = std::vector<std::pair<std::string, std::string>>;
  using IA = std::vector<std::pair<std::string, int64_t>>;
  const SA cubic{{"mode", "cubic"}};
  auto cubic_ctm = [](const char* ctm) { return SA{{"mode", "cubic"}, {"coordinate_transformation_mode", ctm}}; };
  const ResizeCase cases[] = {
      {"cubic half_pixel up", Op::Resize, 19, {2, 3, 8, 9}, {}, {1, 1, 2, 2}, {}, cubic},
      {"cubic half_pixel down", Op::Resize, 19, {1, 2, 16, 15}, {}, {1, 1, 0.5, 0.6}, {}, cubic},
      {"cubic align_corners sizes", Op::Resize, 19, {2, 3, 8, 9}, {}, {}, {2, 3, 17, 5}, cubic_ctm("align_corners")},
      {"cubic asymmetric a=-0.5", Op::Resize, 19, {1, 3, 7, 10}, {}, {1, 1, 1.5, 0.7}, {}, cubic_ctm("asymmetric"), {},
       {}, 0.0f, -0.5f},
      {"cubic pytorch_half_pixel to 1", Op::Resize, 19, {1, 2, 4, 5}, {}, {}, {1, 2, 1, 7}, cubic_ctm("pytorch_half_pixel")},
      {"cubic half_pixel_symmetric", Op::Resize, 19, {1, 3, 10, 10}, {}, {1, 1, 1.7, 0.8}, {},
       cubic_ctm("half_pixel_symmetric")},
      {"cubic tf_half_pixel_for_nn", Op::Resize, 19, {2, 2, 7, 6}, {}, {1, 1, 1.5, 2.5}, {}, cubic_ctm("tf_half_pixel_for_nn")},
      {"cubic crop extrapolation", Op::Resize, 19, {1, 1, 5, 5}, {0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8}, {}, {1, 1, 6, 6},
       cubic_ctm("tf_crop_and_resize"), {}, {}, 10.0f},
      {"cubic exclude_outside a=-0.5", Op::Resize, 19, {1, 2, 6, 6}, {}, {1, 1, 2, 0.8}, {}, cubic,
       IA{{"exclude_outside", 1}}, {}, 0.0f, -0.5f},
      {"cubic 3-D", Op::Resize, 19, {3, 20, 9}, {}, {1, 0.35, 3}, {}, cubic},
      {"cubic axes not_larger", Op::Resize, 19, {2, 3, 8, 12}, {}, {}, {10, 10},
       SA{{"mode", "cubic"}, {"keep_aspect_ratio_policy", "not_larger"}}, {}, {2, 3}},
      {"linear antialias down", Op::Resize, 19, {2, 3, 16, 15}, {}, {1, 1, 0.45, 0.6}, {}, SA{{"mode", "linear"}},
       IA{{"antialias", 1}}},
      {"linear antialias strong down", Op::Resize, 19, {1, 2, 40, 33}, {}, {1, 1, 0.1, 0.23}, {}, SA{{"mode", "linear"}},
       IA{{"antialias", 1}}},
      {"linear antialias up and down align_corners", Op::Resize, 19, {1, 2, 9, 16}, {}, {}, {1, 2, 20, 5},
       SA{{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}, IA{{"antialias", 1}}},
      {"cubic antialias down", Op::Resize, 19, {2, 3, 16, 15}, {}, {1, 1, 0.45, 0.6}, {}, cubic, IA{{"antialias", 1}}},
      {"cubic antialias up", Op::Resize, 19, {1, 2, 5, 6}, {}, {1, 1, 2.5, 1.5}, {}, cubic, IA{{"antialias", 1}}},
      {"cubic antialias exclude_outside a=-0.5", Op::Resize, 19, {1, 2, 17, 12}, {}, {1, 1, 0.3, 0.7}, {}, cubic,
       IA{{"antialias", 1}, {"exclude_outside", 1}}, {}, 0.0f, -0.5f},
      {"cubic antialias pytorch_half_pixel sizes", Op::Resize, 19, {1, 3, 31, 8}, {}, {}, {1, 3, 7, 8},
       cubic_ctm("pytorch_half_pixel"), IA{{"antialias", 1}}},
      {"linear antialias axes not_smaller", Op::Resize, 19, {2, 3, 24, 12}, {}, {}, {5, 4},
       SA{{"mode", "linear"}, {"keep_aspect_ratio_policy", "not_smaller"}}, IA{{"antialias", 1}}, {-2, -1}},
      {"cubic antialias crop", Op::Resize, 19, {1, 1, 12, 12}, {0, 0, 0.1, -0.1, 1, 1, 0.8, 1.2}, {}, {1, 1, 4, 5},
       cubic_ctm("tf_crop_and_resize"), IA{{"antialias", 1}}, {}, -3.0f},
      {"resize-10 cubic", Op::Resize, 10, {2, 3, 5, 7}, {}, {1, 1, 2, 1.5}, {}, cubic},
  };
  for (const ResizeCase& c : cases) check(c);
}

}  // namespace
}  // namespace gpuopt::cuda
