// More cases: variadic Sum/Mean/Min/Max (1 to 40 inputs, each broadcast differently, the first
// one smaller than the output), Resize cubic and antialias, and NonZero at several densities.
#include "cases.h"

#include <fmt/format.h>

// Cases list only the members they need; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpuopt::backend_ops {
namespace {

std::string shapes_label(const std::vector<Shape>& shapes) {
  std::string s;
  for (const Shape& sh : shapes) {
    if (!s.empty()) s += ' ';
    s += shape_to_string(sh);
  }
  return s;
}

InputSpec f32s(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());  // before the move (argument order is unspecified)
  return const_tensor(DType::F32, {n}, std::move(v));
}

}  // namespace

// ops_binary.cpp: Sum/Mean (floats) and Min/Max (floats and integers) with 1..40 inputs. The
// output is the broadcast of all inputs, and in several sets the first input is smaller than the
// output, so the kernel must broadcast it too.
void add_variadic_cases(std::vector<Case>& cases) {
  const std::vector<std::vector<Shape>> sets = {
      {{128, 2, 2, 2}},
      {{128, 2, 2, 2}, {2, 1, 2}},
      {{5, 7, 11, 13}, {11, 13}, {7, 1, 13}},
      {{7, 1, 1}, {5, 1, 11, 13}, {13}, {1, 7, 11, 1}},
      {{3, 1, 8}, {1, 4, 1}, {}, {3, 4, 8}},
      {{64, 3}, {3}, {64, 1}, {1, 3}, {64, 3}, {}, {1, 1}, {64, 3}, {3}, {64, 1}},
  };
  // 40 inputs: two passes of the kernel (32 + 8). Min/Max stay exact in every dtype; Sum/Mean
  // round the first pass's partial sum, so only f32 is held to the tolerance there.
  std::vector<Shape> forty;
  for (int i = 0; i < 40; ++i) forty.push_back(i % 3 == 0 ? Shape{33, 5} : (i % 3 == 1 ? Shape{5} : Shape{33, 1}));
  const DType kMinMax[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::I8, DType::U8};
  for (const char* op : {"Sum", "Mean", "Min", "Max"}) {
    const bool ints = op == std::string("Min") || op == std::string("Max");
    for (DType dt : kMinMax) {
      if (!ints && !dtype_is_float(dt)) continue;
      std::vector<std::vector<Shape>> all = sets;
      if (ints || dt == DType::F32) all.push_back(forty);
      for (const auto& set : all) {
        const std::string shapes = set.size() > 10 ? "[33,5] [5] [33,1] ..." : shapes_label(set);
        Case c{op, label(dt, set[0], fmt::format("{} inputs: {}", set.size(), shapes))};
        const double lo = dt == DType::U8 ? 0 : (dtype_is_float(dt) ? -2 : -50), hi = dtype_is_float(dt) ? 2 : 50;
        for (const Shape& s : set) c.inputs.push_back(data(dt, s, lo, hi));
        c.opset = 13;
        cases.push_back(std::move(c));
      }
    }
  }
}

// ops_resize.cpp: Resize cubic (every coordinate mode, cubic_coeff_a, exclude_outside, crop with
// extrapolation, axes), nearest with exclude_outside, and antialias (linear and cubic, down- and upsampling, strong
// downsampling with wide filters), in f32, f16, bf16, u8 and i8.
void add_resize_more_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  const DType kResize[] = {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I8};
  for (DType dt : kResize) {
    const double lo = dt == DType::U8 ? 0 : (dt == DType::I8 ? -128 : -2);
    const double hi = dt == DType::U8 ? 255.99 : (dt == DType::I8 ? 127.99 : 2);
    auto resize = [&](Shape s, std::string what, InputSpec scales, InputSpec sizes, AttributeMap attrs, InputSpec roi = {}) {
      if (roi.shape.empty()) roi = none;
      cases.push_back({"Resize", label(dt, s, what), {data(dt, s, lo, hi), roi, scales, sizes}, std::move(attrs), 19});
    };
    auto sizes = [](std::vector<double> v) { return constant_i64(std::move(v)); };
    auto cubic = [](const char* ctm) {
      return AttributeMap{{"mode", attr_s("cubic")}, {"coordinate_transformation_mode", attr_s(ctm)}};
    };
    // Cubic: every coordinate mode.
    resize({2, 3, 8, 9}, "cubic x[1,1,2,2] half_pixel", f32s({1, 1, 2, 2}), none, cubic("half_pixel"));
    resize({1, 2, 16, 15}, "cubic x[1,1,0.5,0.6] half_pixel", f32s({1, 1, 0.5, 0.6}), none, cubic("half_pixel"));
    resize({2, 3, 8, 9}, "cubic to [2,3,17,5] align_corners", none, sizes({2, 3, 17, 5}), cubic("align_corners"));
    {
      AttributeMap a = cubic("asymmetric");
      a["cubic_coeff_a"] = attr_f(-0.5f);
      resize({1, 3, 7, 10}, "cubic x[1,1,1.5,0.7] asymmetric a=-0.5", f32s({1, 1, 1.5, 0.7}), none, a);
    }
    resize({1, 2, 4, 5}, "cubic to [1,2,1,7] pytorch_half_pixel", none, sizes({1, 2, 1, 7}), cubic("pytorch_half_pixel"));
    resize({1, 3, 10, 10}, "cubic x[1,1,1.7,0.8] half_pixel_symmetric", f32s({1, 1, 1.7, 0.8}), none,
           cubic("half_pixel_symmetric"));
    resize({2, 2, 7, 6}, "cubic x[1,1,1.5,2.5] tf_half_pixel_for_nn", f32s({1, 1, 1.5, 2.5}), none,
           cubic("tf_half_pixel_for_nn"));
    {
      AttributeMap a = cubic("tf_crop_and_resize");
      a["extrapolation_value"] = attr_f(10.0f);
      resize({1, 1, 5, 5}, "cubic crop roi extrapolation=10", none, sizes({1, 1, 6, 6}), a,
             f32s({0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8}));
    }
    {
      AttributeMap a = cubic("half_pixel");
      a["exclude_outside"] = attr_i(1);
      a["cubic_coeff_a"] = attr_f(-0.5f);
      resize({1, 2, 6, 6}, "cubic x[1,1,2,0.8] exclude_outside a=-0.5", f32s({1, 1, 2, 0.8}), none, a);
    }
    resize({3, 20, 9}, "cubic x[1,0.35,3] (3-D)", f32s({1, 0.35, 3}), none, cubic("half_pixel"));
    {
      AttributeMap a = cubic("half_pixel");
      a["axes"] = attr_ints({2, 3});
      a["keep_aspect_ratio_policy"] = attr_s("not_larger");
      resize({2, 3, 8, 12}, "cubic axes=[2,3] to [10,10] not_larger", none, sizes({10, 10}), a);
    }
    resize({1, 2, 6, 7}, "nearest x[1,1,0.6,1.7] pytorch_half_pixel exclude_outside", f32s({1, 1, 0.6, 1.7}), none,
           {{"mode", attr_s("nearest")}, {"coordinate_transformation_mode", attr_s("pytorch_half_pixel")},
            {"exclude_outside", attr_i(1)}});
    // Antialias: linear and cubic, down (wider filters), strongly down, up (plain filter).
    auto aa = [](const char* mode, const char* ctm) {
      return AttributeMap{{"mode", attr_s(mode)}, {"coordinate_transformation_mode", attr_s(ctm)}, {"antialias", attr_i(1)}};
    };
    resize({2, 3, 16, 15}, "linear antialias x[1,1,0.45,0.6]", f32s({1, 1, 0.45, 0.6}), none, aa("linear", "half_pixel"));
    resize({1, 2, 64, 33}, "linear antialias x[1,1,0.1,0.23]", f32s({1, 1, 0.1, 0.23}), none, aa("linear", "half_pixel"));
    resize({1, 2, 9, 16}, "linear antialias to [1,2,20,5] align_corners", none, sizes({1, 2, 20, 5}),
           aa("linear", "align_corners"));
    resize({2, 3, 16, 15}, "cubic antialias x[1,1,0.45,0.6]", f32s({1, 1, 0.45, 0.6}), none, aa("cubic", "half_pixel"));
    resize({1, 2, 5, 6}, "cubic antialias x[1,1,2.5,1.5]", f32s({1, 1, 2.5, 1.5}), none, aa("cubic", "half_pixel"));
    resize({1, 3, 31, 8}, "cubic antialias to [1,3,7,8] pytorch_half_pixel", none, sizes({1, 3, 7, 8}),
           aa("cubic", "pytorch_half_pixel"));
    resize({2, 3, 32, 32}, "cubic antialias x[1,1,0.25,0.125] asymmetric", f32s({1, 1, 0.25, 0.125}), none,
           aa("cubic", "asymmetric"));
    {
      AttributeMap a = aa("cubic", "half_pixel");
      a["exclude_outside"] = attr_i(1);
      a["cubic_coeff_a"] = attr_f(-0.5f);
      resize({1, 2, 17, 12}, "cubic antialias x[1,1,0.3,0.7] exclude_outside", f32s({1, 1, 0.3, 0.7}), none, a);
    }
    {
      AttributeMap a = aa("linear", "half_pixel_symmetric");
      a["axes"] = attr_ints({-2, -1});
      a["keep_aspect_ratio_policy"] = attr_s("not_smaller");
      resize({2, 3, 24, 12}, "linear antialias axes=[-2,-1] to [5,4] not_smaller", none, sizes({5, 4}), a);
    }
  }
}

// ops_nonzero.cpp: NonZero at densities 100%, ~50%, ~3% and 0% (all zero), ranks 0 to 4, in
// floats, integers and bool; one input large enough for many CUB tiles. The output's shape comes
// from the reference (in a session the executor infers it from a host copy of the input).
void add_nonzero_cases(std::vector<Case>& cases) {
  const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool};
  const Shape shapes[] = {{}, {1000}, {37, 64}, {5, 7, 11}, {128, 2, 2, 2}, {2, 3, 5, 7}, {257, 1031}};
  const std::pair<double, const char*> densities[] = {{0.0, "all non-zero"}, {0.5, "half zero"}, {0.97, "3% non-zero"},
                                                      {1.0, "all zero"}};
  for (DType dt : kTypes)
    for (const Shape& s : shapes)
      for (const auto& [zeros, what] : densities) {
        if (s.size() == 4 && zeros != 0.5) continue;  // rank 4: one density per shape is enough
        // Ranges without zeros of their own: integers in [1, 50), bool all true.
        const bool exact = dtype_is_integer(dt) || dt == DType::Bool;
        InputSpec in = data(dt, s, exact ? (dt == DType::Bool ? 0.5 : 1) : -2, exact ? 50 : 2);
        in.zero_fraction = zeros;
        cases.push_back({"NonZero", label(dt, s, what), {in}, {}, 13});
      }
}

}  // namespace gpuopt::backend_ops

namespace gpuopt::backend_ops {

// kernels/norm.cu: Softmax/LogSoftmax/LayerNormalization rows take the one-warp-per-row path up
// to 1024 values (held in registers, 1..32 per lane) and the block-per-row one past it: widths
// on both sides of each register-count step, rows not a multiple of the 8 rows per block, and
// BERT-base sizes as perf cases.
void add_norm_width_cases(std::vector<Case>& cases) {
  const std::vector<Shape> shapes = {{3, 1},   {9, 31},   {5, 32},    {7, 33},   {11, 100}, {13, 128},
                                     {6, 129}, {3, 257},  {17, 768},  {4, 1000}, {2, 1024}, {3, 1025},
                                     {2, 3000}, {2, 3, 5, 64}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Shape& s : shapes) {
      const int64_t last = s.back();
      cases.push_back({"Softmax", label(dt, s, "width"), {data(dt, s, -8, 8)}, {{"axis", attr_i(-1)}}});
      cases.push_back({"LogSoftmax", label(dt, s, "width"), {data(dt, s, -8, 8)}, {{"axis", attr_i(-1)}}});
      cases.push_back({"LayerNormalization", label(dt, s, "width"), {data(dt, s), data(dt, {last}), data(dt, {last})},
                       {{"axis", attr_i(-1)}, {"epsilon", attr_f(1e-5f)}}});
    }
  // No bias input, and a mask-like row of -1e4 entries (attention after masking).
  cases.push_back({"LayerNormalization", label(DType::F16, {9, 768}, "no bias"),
                   {data(DType::F16, {9, 768}), data(DType::F16, {768})}, {{"axis", attr_i(-1)}}});
  cases.push_back({"Softmax", label(DType::F16, {6, 77}, "masked"), {data(DType::F16, {6, 77}, -1e4, 8)},
                   {{"axis", attr_i(-1)}}});
  // RMSNormalization (opset 23) on the same row kernels: every width, and over the last two axes.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (const Shape& s : shapes) {
      Case c{"RMSNormalization", label(dt, s, "width"), {data(dt, s), data(dt, {s.back()})}, {{"epsilon", attr_f(1e-6f)}}};
      c.opset = 23;
      cases.push_back(std::move(c));
    }
    Case c{"RMSNormalization", label(dt, {3, 4, 96}, "axis=1"), {data(dt, {3, 4, 96}), data(dt, {4, 96})},
           {{"axis", attr_i(1)}}};
    c.opset = 23;
    cases.push_back(std::move(c));
  }
  // SkipLayerNormalization (com.microsoft, fuse_skip_layernorm): every width above through the
  // warp, 16-byte and block kernels; the sum output (pre-LN residual stream); a skip repeated
  // over the batch ([S, H], as ORT allows); no beta.
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Shape& s : shapes) {
      const int64_t last = s.back();
      Case c{"SkipLayerNormalization", label(dt, s, "width, sum kept"),
             {data(dt, s), data(dt, s), data(dt, {last}), data(dt, {last})},
             {{"epsilon", attr_f(1e-5f)}}};
      c.num_outputs = 4;
      cases.push_back(std::move(c));
      cases.push_back({"SkipLayerNormalization", label(dt, s, "width"),
                       {data(dt, s), data(dt, s), data(dt, {last}), data(dt, {last})}, {{"epsilon", attr_f(1e-5f)}}});
    }
  for (DType dt : {DType::F32, DType::F16}) {
    cases.push_back({"SkipLayerNormalization", label(dt, {4, 7, 768}, "skip [7,768], no beta"),
                     {data(dt, {4, 7, 768}), data(dt, {7, 768}), data(dt, {768})}, {{"epsilon", attr_f(1e-12f)}}});
    cases.push_back({"SkipLayerNormalization", label(dt, {3, 5, 3000}, "skip [1,5,3000], rows kernel"),
                     {data(dt, {3, 5, 3000}), data(dt, {1, 5, 3000}), data(dt, {3000}), data(dt, {3000})},
                     {{"epsilon", attr_f(1e-5f)}}});
  }
  for (DType dt : {DType::F16, DType::F32}) {
    cases.push_back({"Softmax", label(dt, {32, 12, 128, 128}, "perf"), {data(dt, {32, 12, 128, 128}, -8, 8)},
                     {{"axis", attr_i(-1)}}});
    cases.push_back({"LayerNormalization", label(dt, {32, 128, 768}, "perf"),
                     {data(dt, {32, 128, 768}), data(dt, {768}), data(dt, {768})}, {{"axis", attr_i(-1)}}});
    cases.push_back({"SkipLayerNormalization", label(dt, {32, 128, 768}, "perf"),
                     {data(dt, {32, 128, 768}), data(dt, {32, 128, 768}), data(dt, {768}), data(dt, {768})},
                     {{"epsilon", attr_f(1e-12f)}}});
  }
}

// ArgMax / ArgMin: a warp per row along the last axis (an LM head's vocabulary), a thread per
// output along another axis; keepdims 0; select_last_index with ties (small integers, f16 steps).
void add_arg_cases(std::vector<Case>& cases) {
  for (const char* op : {"ArgMax", "ArgMin"})
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
      const bool integer = dt == DType::I32 || dt == DType::I64;
      const double hi = integer ? 5 : 2;
      cases.push_back({op, label(dt, {7, 1000}, "last axis"), {data(dt, {7, 1000}, 0, hi)}, {{"axis", attr_i(-1)}}});
      cases.push_back({op, label(dt, {3, 50257}, "vocab, keepdims 0"), {data(dt, {3, 50257}, 0, hi)},
                       {{"axis", attr_i(1)}, {"keepdims", attr_i(0)}}});
      cases.push_back({op, label(dt, {5, 33, 7}, "axis 1"), {data(dt, {5, 33, 7}, 0, hi)}, {{"axis", attr_i(1)}}});
      cases.push_back({op, label(dt, {9, 40}, "last index"), {data(dt, {9, 40}, 0, integer ? 3 : 1)},
                       {{"axis", attr_i(-1)}, {"select_last_index", attr_i(1)}}});
      cases.push_back({op, label(dt, {6, 4, 5}, "axis 0, last index"), {data(dt, {6, 4, 5}, 0, integer ? 3 : 1)},
                       {{"axis", attr_i(0)}, {"select_last_index", attr_i(1)}}});
    }
}

// FusedGemm (com.microsoft, fuse_gemm_activation): the activation in cuBLASLt's epilogue with a
// bias row, or a pass after the GEMM (a [M, N] C, no C, and exact GELU in f32). The exact GELU
// in f16/bf16 runs as cuBLASLt's tanh form (at most 4.7e-4 apart), inside the f16 tolerance.
void add_fused_gemm_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const std::string act : {"Relu", "Gelu", "GeluTanh"}) {
      AttributeMap a{{"activation", attr_s(act == "GeluTanh" ? "Gelu" : act)}};
      if (act == "GeluTanh") a["approximate"] = attr_s("tanh");
      auto add = [&](const std::string& what, std::vector<InputSpec> in, AttributeMap extra) {
        AttributeMap attrs = a;
        attrs.insert(extra.begin(), extra.end());
        cases.push_back({"FusedGemm", label(dt, in[0].shape, act + " " + what), std::move(in), std::move(attrs)});
      };
      add("bias row [96,64]x[64,72]", {data(dt, {96, 64}, -1, 1), data(dt, {64, 72}, -0.5, 0.5), data(dt, {72})}, {});
      add("transB bias row [33,48]x[40,48]^T",
          {data(dt, {33, 48}, -1, 1), data(dt, {40, 48}, -0.5, 0.5), data(dt, {40})}, {{"transB", attr_i(1)}});
      add("C [17,24] beta 0.5", {data(dt, {17, 32}, -1, 1), data(dt, {32, 24}, -0.5, 0.5), data(dt, {17, 24})},
          {{"beta", attr_f(0.5f)}});
      add("no C", {data(dt, {17, 32}, -1, 1), data(dt, {32, 24}, -0.5, 0.5), none}, {});
    }
  for (DType dt : {DType::F16, DType::BF16})
    cases.push_back({"FusedGemm", label(dt, {4096, 768}, "Gelu perf BERT-base b32 intermediate"),
                     {data(dt, {4096, 768}, -1, 1), data(dt, {768, 3072}, -0.1, 0.1), data(dt, {3072})},
                     {{"activation", attr_s("Gelu")}}});
}

}  // namespace gpuopt::backend_ops
