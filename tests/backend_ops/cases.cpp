// The case list: every op the CUDA backend may handle, in f32, f16 and bf16, on shapes that mix
// powers of two with odd sizes. Ops without a CUDA kernel report "unsupported".
#include "cases.h"

#include "core/tensor.h"

#include <fmt/format.h>

// Cases list only the members they need; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpuopt::backend_ops {

InputSpec data(DType dt, Shape s, double lo, double hi) {
  InputSpec in;
  in.dtype = dt;
  in.shape = std::move(s);
  in.lo = lo;
  in.hi = hi;
  return in;
}
InputSpec constant_i64(std::vector<double> v) {
  InputSpec in;
  in.dtype = DType::I64;
  in.shape = {static_cast<int64_t>(v.size())};
  in.host_constant = true;
  in.values = std::move(v);
  return in;
}
InputSpec scalar(DType dt, double v) {
  InputSpec in;
  in.dtype = dt;
  in.shape = {};
  in.host_constant = true;
  in.values = {v};
  return in;
}

// A constant tensor of any shape (indices with a chosen pattern; still uploaded to the device
// unless the kernel reads that input on the host).
InputSpec const_tensor(DType dt, Shape s, std::vector<double> v) {
  InputSpec in;
  in.dtype = dt;
  in.shape = std::move(s);
  in.host_constant = true;
  in.values = std::move(v);
  return in;
}

std::string label(DType dt, const Shape& s, const std::string& extra) {
  return fmt::format("{} {}{}{}", dtype_name(dt), shape_to_string(s), extra.empty() ? "" : " ", extra);
}

namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};
const Shape kShapes[] = {{128, 2, 2, 2}, {5, 7, 11, 13}};

// Deterministic index values in [lo, hi] (negative ones count from the end).
std::vector<double> index_values(int64_t n, int64_t lo, int64_t hi, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<double>(lo + static_cast<int64_t>((x >> 8) % static_cast<uint32_t>(hi - lo + 1)));
  }
  return v;
}

// ops_index.cpp / ops_create.cpp: index, layout and creation ops.
void add_index_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const DType kMove[] = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::U8};
  for (DType dt : kMove) {
    add({"DepthToSpace", label(dt, {2, 8, 3, 5}, "b=2 DCR"), {data(dt, {2, 8, 3, 5}, 0, 100)},
         {{"blocksize", attr_i(2)}, {"mode", attr_s("DCR")}}});
    add({"DepthToSpace", label(dt, {1, 18, 4, 7}, "b=3 CRD"), {data(dt, {1, 18, 4, 7}, 0, 100)},
         {{"blocksize", attr_i(3)}, {"mode", attr_s("CRD")}}});
    add({"SpaceToDepth", label(dt, {2, 3, 6, 10}, "b=2"), {data(dt, {2, 3, 6, 10}, 0, 100)}, {{"blocksize", attr_i(2)}}});
    add({"SpaceToDepth", label(dt, {1, 5, 9, 3}, "b=3"), {data(dt, {1, 5, 9, 3}, 0, 100)}, {{"blocksize", attr_i(3)}}});
    add({"Trilu", label(dt, {3, 5, 7}, "upper k=0"), {data(dt, {3, 5, 7}, 0, 100)}});
    add({"Trilu", label(dt, {2, 16, 9}, "lower k=-1"), {data(dt, {2, 16, 9}, 0, 100), scalar(DType::I64, -1)},
         {{"upper", attr_i(0)}}});
    add({"Trilu", label(dt, {2, 16, 9}, "upper k=2"), {data(dt, {2, 16, 9}, 0, 100), scalar(DType::I64, 2)}});
    add({"Trilu", label(dt, {4, 7}, "lower k=10"), {data(dt, {4, 7}, 0, 100), scalar(DType::I64, 10)}, {{"upper", attr_i(0)}}});
  }
  for (DType dt : kFloats) {
    // Random indices over [-extent, extent): negative ones count from the end.
    add({"GatherElements", label(dt, {5, 7, 11}, "idx [5,4,11] axis=1"), {data(dt, {5, 7, 11}), data(DType::I64, {5, 4, 11}, -7, 6.99)},
         {{"axis", attr_i(1)}}});
    add({"GatherElements", label(dt, {8, 3, 5}, "idx [13,3,2] axis=0"), {data(dt, {8, 3, 5}), data(DType::I64, {13, 3, 2}, -8, 7.99)}});
    add({"GatherElements", label(dt, {4, 16}, "idx i32 [3,9] axis=-1"), {data(dt, {4, 16}), data(DType::I32, {3, 9}, -16, 15.99)},
         {{"axis", attr_i(-1)}}});
    // GatherND: per-column ranges, so indices are built here.
    {
      std::vector<double> v;
      const auto a = index_values(6, -5, 4, 1), b = index_values(6, -7, 6, 2);
      for (size_t i = 0; i < 6; ++i) v.insert(v.end(), {a[i], b[i]});
      add({"GatherND", label(dt, {5, 7, 11}, "idx [3,2,2]"), {data(dt, {5, 7, 11}), const_tensor(DType::I64, {3, 2, 2}, v)}});
    }
    add({"GatherND", label(dt, {5, 7, 11}, "idx [4,1]"), {data(dt, {5, 7, 11}), const_tensor(DType::I64, {4, 1}, {4, -1, 0, 2})}});
    {
      std::vector<double> v;
      const auto a = index_values(9, 0, 4, 3), b = index_values(9, -7, 6, 4), c = index_values(9, 0, 10, 5);
      for (size_t i = 0; i < 9; ++i) v.insert(v.end(), {a[i], b[i], c[i]});
      add({"GatherND", label(dt, {5, 7, 11}, "idx i32 [9,3] scalars"), {data(dt, {5, 7, 11}), const_tensor(DType::I32, {9, 3}, v)}});
    }
    add({"GatherND", label(dt, {4, 7, 11}, "idx [4,3,1] batch_dims=1"),
         {data(dt, {4, 7, 11}), const_tensor(DType::I64, {4, 3, 1}, index_values(12, -7, 6, 6))}, {{"batch_dims", attr_i(1)}}});
  }
  // Scatter: reduction none with distinct targets (a duplicate leaves an unspecified update);
  // the reductions with random, repeating targets.
  std::vector<DType> scatter_types(std::begin(kFloats), std::end(kFloats));
  scatter_types.push_back(DType::I32);
  scatter_types.push_back(DType::I64);
  for (DType dt : scatter_types) {
    std::vector<double> distinct;  // [5,3,11] along axis 1 of [5,7,11]: (i+k), +3, +6 mod 7, some negative
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 11; ++k) {
          const int v = (i + k + 3 * j) % 7;
          distinct.push_back((i + j + k) % 2 ? v - 7 : v);
        }
    for (const char* op : {"ScatterElements", "Scatter"}) {
      Case c{op, label(dt, {5, 7, 11}, "idx [5,3,11] axis=1"),
             {data(dt, {5, 7, 11}), const_tensor(DType::I64, {5, 3, 11}, distinct), data(dt, {5, 3, 11})},
             {{"axis", attr_i(1)}}};
      if (std::string(op) == "Scatter") c.opset = 10;
      add(c);
    }
    for (const char* red : {"add", "mul", "max", "min"}) {
      add({"ScatterElements", label(dt, {6, 9}, fmt::format("idx [6,13] axis=1 {}", red)),
           {data(dt, {6, 9}), data(DType::I64, {6, 13}, -9, 8.99), data(dt, {6, 13})},
           {{"axis", attr_i(1)}, {"reduction", attr_s(red)}}, 18});
      add({"ScatterND", label(dt, {5, 7, 11}, fmt::format("idx [6,1] {}", red)),
           {data(dt, {5, 7, 11}), const_tensor(DType::I64, {6, 1}, index_values(6, -5, 4, 7)), data(dt, {6, 7, 11})},
           {{"reduction", attr_s(red)}}, 18});
    }
    add({"ScatterElements", label(dt, {16, 4}, "idx i32 [16,4] axis=0"),
         {data(dt, {16, 4}), const_tensor(DType::I32, {16, 4}, [] {
            std::vector<double> v;
            for (int i = 0; i < 16; ++i)
              for (int k = 0; k < 4; ++k) v.push_back((i * 5 + k) % 16);
            return v;
          }()), data(dt, {16, 4})}});
    add({"ScatterND", label(dt, {5, 7, 11}, "idx [3,2]"),
         {data(dt, {5, 7, 11}), const_tensor(DType::I64, {3, 2}, {0, 1, -1, 6, 2, -4}), data(dt, {3, 11})}});
    add({"ScatterND", label(dt, {5, 7, 11}, "idx i32 [2,2,3]"),
         {data(dt, {5, 7, 11}), const_tensor(DType::I32, {2, 2, 3}, {0, 0, 0, 4, 6, 10, -1, 0, 3, 2, -3, -11}), data(dt, {2, 2})}});
  }
  for (DType dt : kFloats) {
    add({"Cosh", label(dt, {5, 7, 11, 13}), {data(dt, {5, 7, 11, 13}, -3, 3)}});
    add({"CastLike", label(dt, {5, 7, 11, 13}, "like f32"), {data(dt, {5, 7, 11, 13}), data(DType::F32, {1})}});
    add({"CastLike", label(DType::F32, {5, 7, 11, 13}, fmt::format("like {}", dtype_name(dt))),
         {data(DType::F32, {5, 7, 11, 13}), data(dt, {1})}});
    add({"CastLike", label(dt, {5, 7, 11}, "like i32"), {data(dt, {5, 7, 11}, -100, 100), data(DType::I32, {1})}});
  }
  // Range: floats accumulate in their own type (f16 drifts from start + i * delta).
  for (DType dt : kFloats) {
    add({"Range", label(dt, {}, "0.5:37.3:0.7"), {scalar(dt, 0.5), scalar(dt, 37.3), scalar(dt, 0.7)}});
    add({"Range", label(dt, {}, "-3:50:0.1"), {scalar(dt, -3), scalar(dt, 50), scalar(dt, 0.1)}});
    add({"Range", label(dt, {}, "10:-7:-1.5"), {scalar(dt, 10), scalar(dt, -7), scalar(dt, -1.5)}});
  }
  for (DType dt : {DType::I64, DType::I32}) {
    add({"Range", label(dt, {}, "-5:1000:3"), {scalar(dt, -5), scalar(dt, 1000), scalar(dt, 3)}});
    add({"Range", label(dt, {}, "7:-20:-4"), {scalar(dt, 7), scalar(dt, -20), scalar(dt, -4)}});
  }
  // ConstantOfShape: the value's dtype sets the output's; no value = f32 zeros.
  add({"ConstantOfShape", "i64 [3,5,7] no value", {constant_i64({3, 5, 7})}});
  add({"ConstantOfShape", "i64 [3,5,7] f32 1.25", {constant_i64({3, 5, 7})},
       {{"value", attr_t(Tensor::from_vector<float>(DType::F32, {1}, {1.25f}))}}});
  add({"ConstantOfShape", "i64 [2,129] f16 -3.5", {constant_i64({2, 129})},
       {{"value", attr_t(Tensor::from_vector<float>(DType::F16, {1}, {-3.5f}))}}});
  add({"ConstantOfShape", "i64 [17] i64 7", {constant_i64({17})},
       {{"value", attr_t(Tensor::from_vector<int64_t>(DType::I64, {1}, {7}))}}});
  add({"ConstantOfShape", "i64 [4,0,3] i32 9", {constant_i64({4, 0, 3})},
       {{"value", attr_t(Tensor::from_vector<int32_t>(DType::I32, {1}, {9}))}}});
  add({"ConstantOfShape", "i64 [5,3] bool true", {constant_i64({5, 3})},
       {{"value", attr_t(Tensor::from_vector<int>(DType::Bool, {1}, {1}))}}});
}

// ops_norm2.cpp: TopK, InstanceNormalization, GroupNormalization.
void add_row_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const DType kTopK[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
  for (DType dt : kTopK) {
    // Short f16/bf16 mantissas and narrow integer ranges make ties: they go to the lower index.
    const double lo = dtype_is_integer(dt) ? -20 : -2, hi = dtype_is_integer(dt) ? 20 : 2;
    auto topk = [&](Shape s, int64_t k, int64_t axis, int64_t largest) {
      Case c{"TopK", label(dt, s, fmt::format("k={} axis={}{}", k, axis, largest ? "" : " smallest")),
             {data(dt, s, lo, hi), constant_i64({static_cast<double>(k)})},
             {{"axis", attr_i(axis)}, {"largest", attr_i(largest)}}, 11};
      c.num_outputs = 2;
      add(c);
    };
    topk({5, 7, 11, 13}, 5, -1, 1);
    topk({5, 7, 11, 13}, 7, 1, 1);
    topk({5, 7, 11, 13}, 3, 0, 0);
    topk({3, 1000}, 10, 1, 0);
    topk({2, 2500}, 64, -1, 1);  // lines longer than one shared-memory tile
    topk({128, 2}, 2, 1, 1);
    topk({6, 16}, 0, 1, 1);
  }
  for (DType dt : kFloats) {
    for (const Shape& s : {Shape{2, 7, 11, 13}, Shape{3, 16, 64}, Shape{1, 5, 9, 4, 3}})
      add({"InstanceNormalization", label(dt, s), {data(dt, s, -3, 5), data(dt, {s[1]}), data(dt, {s[1]})},
           {{"epsilon", attr_f(1e-5f)}}});
    add({"GroupNormalization", label(dt, {2, 12, 11, 13}, "G=3 per-channel"),
         {data(dt, {2, 12, 11, 13}, -3, 5), data(dt, {12}), data(dt, {12})}, {{"num_groups", attr_i(3)}}, 21});
    add({"GroupNormalization", label(dt, {3, 8, 5, 7}, "G=4 per-group"),
         {data(dt, {3, 8, 5, 7}), data(dt, {4}), data(dt, {4})}, {{"num_groups", attr_i(4)}, {"epsilon", attr_f(1e-3f)}}, 18});
    add({"GroupNormalization", label(dt, {2, 6, 64}, "G=1"), {data(dt, {2, 6, 64}), data(dt, {6}), data(dt, {6})},
         {{"num_groups", attr_i(1)}}, 21});
    add({"GroupNormalization", label(dt, {4, 5, 3, 3}, "G=C"), {data(dt, {4, 5, 3, 3}), data(dt, {5}), data(dt, {5})},
         {{"num_groups", attr_i(5)}}, 21});
  }
}

// ops_resize.cpp: Resize (opsets 10, 13, 18, 19) and Upsample (7, 9), nearest and linear.
void add_resize_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  auto f32s = [](std::vector<double> v) {
    const int64_t n = static_cast<int64_t>(v.size());  // before the move (argument order is unspecified)
    return const_tensor(DType::F32, {n}, std::move(v));
  };
  const DType kResize[] = {DType::F32, DType::F16, DType::BF16, DType::U8};
  for (DType dt : kResize) {
    const double lo = dt == DType::U8 ? 0 : -2, hi = dt == DType::U8 ? 255.99 : 2;
    auto resize = [&](Shape s, std::string what, InputSpec scales, InputSpec sizes, AttributeMap attrs, int opset = 19,
                      InputSpec roi = InputSpec{DType::Undefined, {}, false, {}, 0, 0}) {
      add({"Resize", label(dt, s, what), {data(dt, s, lo, hi), roi, scales, sizes}, std::move(attrs), opset});
    };
    auto sizes = [](std::vector<double> v) { return constant_i64(std::move(v)); };
    // Nearest: each rounding mode with a coordinate mode where its ties occur.
    resize({2, 3, 5, 7}, "nearest x[1,1,2,3] half_pixel", f32s({1, 1, 2, 3}), none, {{"mode", attr_s("nearest")}});
    resize({1, 2, 16, 15}, "nearest x[1,1,0.5,0.6] asymmetric floor", f32s({1, 1, 0.5, 0.6}), none,
           {{"mode", attr_s("nearest")}, {"coordinate_transformation_mode", attr_s("asymmetric")}, {"nearest_mode", attr_s("floor")}});
    resize({1, 3, 4, 5}, "nearest to [1,3,9,11] align_corners prefer_ceil", none, sizes({1, 3, 9, 11}),
           {{"mode", attr_s("nearest")}, {"coordinate_transformation_mode", attr_s("align_corners")},
            {"nearest_mode", attr_s("round_prefer_ceil")}});
    resize({2, 2, 7, 6}, "nearest x[1,1,1.5,2.5] tf_half_pixel_for_nn ceil", f32s({1, 1, 1.5, 2.5}), none,
           {{"mode", attr_s("nearest")}, {"coordinate_transformation_mode", attr_s("tf_half_pixel_for_nn")},
            {"nearest_mode", attr_s("ceil")}});
    // Linear: every coordinate mode.
    resize({2, 3, 8, 9}, "linear x[1,1,2,2] half_pixel", f32s({1, 1, 2, 2}), none, {{"mode", attr_s("linear")}});
    resize({2, 3, 8, 9}, "linear to [2,3,17,5] align_corners", none, sizes({2, 3, 17, 5}),
           {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("align_corners")}});
    resize({1, 2, 4, 5}, "linear to [1,2,1,7] pytorch_half_pixel", none, sizes({1, 2, 1, 7}),
           {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("pytorch_half_pixel")}});
    resize({1, 3, 10, 10}, "linear x[1,1,1.7,0.8] half_pixel_symmetric", f32s({1, 1, 1.7, 0.8}), none,
           {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("half_pixel_symmetric")}});
    resize({2, 5, 6, 7}, "linear x[2,1,1.5,0.5] asymmetric (N-D)", f32s({2, 1, 1.5, 0.5}), none,
           {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("asymmetric")}});
    resize({3, 20, 9}, "linear x[1,0.35,3] half_pixel (3-D)", f32s({1, 0.35, 3}), none, {{"mode", attr_s("linear")}});
    resize({1, 1, 5, 5}, "linear crop roi extrapolation=10", none, sizes({1, 1, 6, 6}),
           {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("tf_crop_and_resize")},
            {"extrapolation_value", attr_f(10.0f)}},
           19, f32s({0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8}));
    resize({1, 2, 6, 6}, "linear x[1,1,2,2] exclude_outside", f32s({1, 1, 2, 2}), none,
           {{"mode", attr_s("linear")}, {"exclude_outside", attr_i(1)}});
    resize({2, 3, 8, 9}, "linear axes=[2,3] x[2,0.5]", f32s({2, 0.5}), none,
           {{"mode", attr_s("linear")}, {"axes", attr_ints({2, 3})}});
    resize({2, 3, 8, 12}, "nearest axes=[2,3] to [10,10] not_larger", none, sizes({10, 10}),
           {{"mode", attr_s("nearest")}, {"axes", attr_ints({2, 3})}, {"keep_aspect_ratio_policy", attr_s("not_larger")}});
    resize({2, 3, 8, 12}, "linear axes=[-1,-2] to [5,20] not_smaller", none, sizes({5, 20}),
           {{"mode", attr_s("linear")}, {"axes", attr_ints({-1, -2})}, {"keep_aspect_ratio_policy", attr_s("not_smaller")}});
    resize({2, 3, 5, 7}, "nearest x[1,1,3,2] opset 13", f32s({1, 1, 3, 2}), none, {{"mode", attr_s("nearest")}}, 13);
    // Resize-10 and Upsample: asymmetric, nearest rounds down.
    add({"Resize", label(dt, {2, 3, 5, 7}, "opset 10 linear x[1,1,2,1.5]"), {data(dt, {2, 3, 5, 7}, lo, hi), f32s({1, 1, 2, 1.5})},
         {{"mode", attr_s("linear")}}, 10});
    add({"Upsample", label(dt, {2, 3, 5, 7}, "opset 9 nearest x[1,1,2,3]"), {data(dt, {2, 3, 5, 7}, lo, hi), f32s({1, 1, 2, 3})},
         {{"mode", attr_s("nearest")}}, 9});
    {
      Attribute sc;
      sc.kind = Attribute::Kind::kFloats;
      sc.floats = {1, 1, 2, 2};
      add({"Upsample", label(dt, {1, 3, 4, 6}, "opset 7 bilinear x[1,1,2,2]"), {data(dt, {1, 3, 4, 6}, lo, hi)},
           {{"mode", attr_s("bilinear")}, {"scales", sc}}, 7});
    }
  }
}

// ops_quant.cpp: QuantizeLinear / DequantizeLinear, per tensor and per axis, u8 and i8.
void add_quant_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  for (DType dt : kFloats) {
    const Shape s{5, 7, 11, 13};
    add({"QuantizeLinear", label(dt, s, "per-tensor u8 zp=128"),
         {data(dt, s, -3, 3), const_tensor(dt, {}, {0.02}), const_tensor(DType::U8, {}, {128})}, {}, 19});
    add({"QuantizeLinear", label(dt, s, "per-tensor i8 zp=-3"),
         {data(dt, s, -3, 3), const_tensor(dt, {1}, {0.015625}), const_tensor(DType::I8, {1}, {-3})}, {}, 19});
    add({"QuantizeLinear", label(dt, s, "per-tensor no zp (u8, saturates)"), {data(dt, s), const_tensor(dt, {}, {0.01})}, {}, 19});
    add({"QuantizeLinear", label(dt, s, "per-axis 1 i8"),
         {data(dt, s, -3, 3), const_tensor(dt, {7}, {0.01, 0.02, 0.03, 0.05, 0.1, 0.0125, 0.5}),
          const_tensor(DType::I8, {7}, {0, 1, -1, 5, -7, 100, -128})},
         {{"axis", attr_i(1)}}, 19});
    add({"QuantizeLinear", label(dt, {3, 16, 4}, "per-axis -1 u8"),
         {data(dt, {3, 16, 4}), const_tensor(dt, {4}, {0.01, 0.02, 0.04, 0.08}), const_tensor(DType::U8, {4}, {0, 10, 128, 250})},
         {{"axis", attr_i(-1)}}, 19});
    // Exact halves of the quotient: round half to even.
    add({"QuantizeLinear", label(dt, {12}, "ties"),
         {const_tensor(dt, {12}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5, -3.5, 0.25, 0.75, 1.25}), const_tensor(dt, {}, {1.0}),
          const_tensor(DType::I8, {}, {0})}, {}, 19});

    add({"DequantizeLinear", label(DType::U8, s, fmt::format("per-tensor to {}", dtype_name(dt))),
         {data(DType::U8, s, 0, 255.99), const_tensor(dt, {}, {0.02}), const_tensor(DType::U8, {}, {128})}, {}, 19});
    add({"DequantizeLinear", label(DType::I8, s, fmt::format("per-axis 1 to {}", dtype_name(dt))),
         {data(DType::I8, s, -128, 127.99), const_tensor(dt, {7}, {0.01, 0.02, 0.03, 0.05, 0.1, 0.0125, 0.5}),
          const_tensor(DType::I8, {7}, {0, 1, -1, 5, -7, 100, -128})},
         {{"axis", attr_i(1)}}, 19});
    // A multiple of 8 elements: f16 takes the vectorized per-tensor kernels (8 per thread).
    const Shape v8{2, 8, 6, 16};
    add({"QuantizeLinear", label(dt, v8, "per-tensor i8 zp=0, x8"),
         {data(dt, v8, -3, 3), const_tensor(dt, {}, {0.02}), const_tensor(DType::I8, {}, {0})}, {}, 19});
    add({"QuantizeLinear", label(dt, v8, "per-tensor u8 zp=128, x8 (saturates)"),
         {data(dt, v8, -4, 4), const_tensor(dt, {1}, {0.0123}), const_tensor(DType::U8, {1}, {128})}, {}, 19});
    add({"DequantizeLinear", label(DType::I8, v8, fmt::format("per-tensor zp=0 to {}, x8", dtype_name(dt))),
         {data(DType::I8, v8, -128, 127.99), const_tensor(dt, {}, {0.02}), const_tensor(DType::I8, {}, {0})}, {}, 19});
    add({"DequantizeLinear", label(DType::U8, v8, fmt::format("per-tensor zp=7 to {}, x8", dtype_name(dt))),
         {data(DType::U8, v8, 0, 255.99), const_tensor(dt, {}, {0.0173}), const_tensor(DType::U8, {}, {7})}, {}, 19});
    add({"DequantizeLinear", label(DType::I32, {6, 33}, fmt::format("per-tensor no zp to {}", dtype_name(dt))),
         {data(DType::I32, {6, 33}, -100000, 100000), const_tensor(dt, {}, {0.001})}, {}, 19});
  }
}

// ops_convt.cpp: ConvTranspose through cuDNN's backward-data pass.
void add_conv_transpose_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  for (DType dt : kFloats) {
    add({"ConvTranspose", label(dt, {2, 4, 7, 9}, "k3 s2 p1 out_pad 1 bias"),
         {data(dt, {2, 4, 7, 9}), data(dt, {4, 3, 3, 3}, -0.5, 0.5), data(dt, {3})},
         {{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})},
          {"output_padding", attr_ints({1, 1})}}});
    add({"ConvTranspose", label(dt, {1, 6, 5, 5}, "k4 s2 p1 group 3"),
         {data(dt, {1, 6, 5, 5}), data(dt, {6, 2, 4, 4}, -0.5, 0.5), data(dt, {6})},
         {{"kernel_shape", attr_ints({4, 4})}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})},
          {"group", attr_i(3)}}});
    add({"ConvTranspose", label(dt, {1, 3, 8, 8}, "k3 dilation 2"), {data(dt, {1, 3, 8, 8}), data(dt, {3, 5, 3, 3}, -0.5, 0.5)},
         {{"kernel_shape", attr_ints({3, 3})}, {"dilations", attr_ints({2, 2})}}});
    add({"ConvTranspose", label(dt, {2, 16, 4, 4}, "k2 s2 (upsampling)"), {data(dt, {2, 16, 4, 4}), data(dt, {16, 8, 2, 2}, -0.5, 0.5)},
         {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}}});
  }
}

// ops_qmatmul.cpp: MatMulInteger and QLinearMatMul (exact integer sums, reference requantization).
void add_int_matmul_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  auto u8 = [](Shape s) { return data(DType::U8, std::move(s), 0, 255.99); };
  auto i8 = [](Shape s) { return data(DType::I8, std::move(s), -128, 127.99); };
  add({"MatMulInteger", label(DType::U8, {3, 7, 40}, "x u8 [40,9] zp 128 / per-col"),
       {u8({3, 7, 40}), u8({40, 9}), const_tensor(DType::U8, {}, {128}), data(DType::U8, {9}, 0, 255.99)}});
  add({"MatMulInteger", label(DType::U8, {2, 1, 5, 64}, "x [3,64,33] no zp"), {u8({2, 1, 5, 64}), u8({3, 64, 33})}});
  add({"MatMulInteger", label(DType::I8, {7, 31}, "x i8 [31,16] per-row zp"),
       {i8({7, 31}), i8({31, 16}), data(DType::I8, {7}, -128, 127.99), const_tensor(DType::I8, {1}, {-5})}});
  add({"MatMulInteger", label(DType::U8, {31}, "vector x i8 [31,5]"), {u8({31}), i8({31, 5})}});
  for (DType q : {DType::U8, DType::I8}) {
    auto qd = [&](Shape s) { return q == DType::U8 ? u8(std::move(s)) : i8(std::move(s)); };
    const double zp = q == DType::U8 ? 128 : -3, yzp = q == DType::U8 ? 100 : 7;
    add({"QLinearMatMul", label(q, {5, 13, 33}, "per-tensor a, per-column b"),
         {qd({5, 13, 33}), const_tensor(DType::F32, {}, {0.02}), const_tensor(q, {}, {zp}), qd({33, 17}),
          data(DType::F32, {17}, 0.001, 0.01), data(q, {17}, q == DType::U8 ? 0 : -128, q == DType::U8 ? 255.99 : 127.99),
          const_tensor(DType::F32, {}, {0.5}), const_tensor(q, {}, {yzp})},
         {}, 10});
    add({"QLinearMatMul", label(q, {2, 9, 20}, "per-row a, batch broadcast b [1,20,11]"),
         {qd({2, 9, 20}), data(DType::F32, {9}, 0.01, 0.05), data(q, {9}, q == DType::U8 ? 0 : -128, q == DType::U8 ? 255.99 : 127.99),
          qd({1, 20, 11}), const_tensor(DType::F32, {}, {0.004}), const_tensor(q, {}, {zp}),
          const_tensor(DType::F32, {}, {0.25}), const_tensor(q, {}, {yzp})},
         {}, 10});
  }
}

// ops_einsum.cpp: Einsum (explicit/implicit output, diagonals, ellipsis broadcasting, 3 operands).
void add_einsum_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  struct E {
    const char* eq;
    std::vector<Shape> shapes;
  };
  const E eqs[] = {
      {"ij,jk->ik", {{13, 33}, {33, 17}}},
      {"bij,bjk->bik", {{3, 5, 16}, {3, 16, 7}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 7, 16}, {2, 3, 9, 16}}},
      {"ii->i", {{9, 9}}},
      {"ij->", {{8, 11}}},
      {"ij->ji", {{5, 32}}},
      {"ij,jk", {{6, 4}, {4, 3}}},
      {"...ij,...jk->...ik", {{2, 1, 5, 6}, {3, 6, 4}}},
      {"i,i", {{64}, {64}}},
      {"ij,jk,kl->il", {{4, 5}, {5, 6}, {6, 7}}},
      {"bij,j->bi", {{2, 16, 9}, {9}}},
  };
  for (DType dt : kFloats)
    for (const E& e : eqs) {
      Case c{"Einsum", label(dt, e.shapes[0], e.eq), {}, {{"equation", attr_s(e.eq)}}, 12};
      for (const Shape& s : e.shapes) c.inputs.push_back(data(dt, s));
      add(c);
    }
}

// ops_qconv.cpp: QLinearConv (exact integer sums, reference requantization).
void add_qconv_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  auto u8 = [](Shape s) { return data(DType::U8, std::move(s), 0, 255.99); };
  auto i8 = [](Shape s) { return data(DType::I8, std::move(s), -128, 127.99); };
  auto f32 = [](double v) { return const_tensor(DType::F32, {}, {v}); };
  add({"QLinearConv", label(DType::U8, {2, 3, 9, 11}, "k3 p1 s2 bias"),
       {u8({2, 3, 9, 11}), f32(0.02), const_tensor(DType::U8, {}, {120}), u8({4, 3, 3, 3}), f32(0.003),
        const_tensor(DType::U8, {}, {128}), f32(0.3), const_tensor(DType::U8, {}, {90}), data(DType::I32, {4}, -500, 500)},
       {{"kernel_shape", attr_ints({3, 3})}, {"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}}, 10});
  add({"QLinearConv", label(DType::U8, {1, 4, 7, 7}, "i8 w per-channel group 2"),
       {u8({1, 4, 7, 7}), f32(0.02), const_tensor(DType::U8, {}, {128}), i8({6, 2, 3, 3}), data(DType::F32, {6}, 0.001, 0.004),
        data(DType::I8, {6}, -10, 10), f32(0.25), const_tensor(DType::U8, {}, {100})},
       {{"group", attr_i(2)}, {"pads", attr_ints({0, 1, 2, 1})}}, 10});
  add({"QLinearConv", label(DType::I8, {2, 3, 17}, "1-D SAME_UPPER s3 i8 out"),
       {i8({2, 3, 17}), f32(0.05), const_tensor(DType::I8, {}, {-3}), i8({5, 3, 4}), f32(0.004),
        const_tensor(DType::I8, {}, {0}), f32(0.5), const_tensor(DType::I8, {}, {5}), data(DType::I32, {5}, -300, 300)},
       {{"auto_pad", attr_s("SAME_UPPER")}, {"strides", attr_ints({3})}}, 10});
}

// ops_scan.cpp: CumSum / CumProd (exclusive, reverse, each axis).
void add_scan_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const DType kScan[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
  for (DType dt : kScan) {
    const bool integer = dtype_is_integer(dt);
    const Shape s{5, 7, 11, 13};
    add({"CumSum", label(dt, s, "axis=-1"), {data(dt, s, integer ? -50 : -2, integer ? 50 : 2), scalar(DType::I64, -1)}, {}, 14});
    add({"CumSum", label(dt, s, "axis=1 exclusive"), {data(dt, s, integer ? -50 : -2, integer ? 50 : 2), scalar(DType::I64, 1)},
         {{"exclusive", attr_i(1)}}, 14});
    add({"CumSum", label(dt, s, "axis=0 reverse"), {data(dt, s, integer ? -50 : -2, integer ? 50 : 2), scalar(DType::I32, 0)},
         {{"reverse", attr_i(1)}}, 14});
    add({"CumSum", label(dt, {128, 2, 2, 2}, "axis=2 exclusive reverse"), {data(dt, {128, 2, 2, 2}), scalar(DType::I64, 2)},
         {{"exclusive", attr_i(1)}, {"reverse", attr_i(1)}}, 14});
    add({"CumProd", label(dt, {6, 9, 10}, "axis=-1"), {data(dt, {6, 9, 10}, integer ? -3 : 0.8, integer ? 3 : 1.2), scalar(DType::I64, -1)},
         {}, 21});
    add({"CumProd", label(dt, {6, 9, 10}, "axis=1 exclusive reverse"),
         {data(dt, {6, 9, 10}, integer ? -3 : 0.8, integer ? 3 : 1.2), scalar(DType::I64, 1)},
         {{"exclusive", attr_i(1)}, {"reverse", attr_i(1)}}, 21});
  }
}

}  // namespace

// Whether `from` broadcasts to `to` without changing `to` (ONNX's unidirectional broadcasting).
static bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != 1 && f != t) return false;
  }
  return true;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };

  // Unary math and activations (positive-only domains get positive inputs).
  const char* unary[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "Round", "Sign",
                         "Sin", "Cos", "Softplus", "HardSwish", "Gelu"};
  for (const char* op : unary)
    for (DType dt : kFloats)
      for (const Shape& s : kShapes) add({op, label(dt, s), {data(dt, s)}});
  for (const char* op : {"Sqrt", "Log", "Reciprocal"})
    for (DType dt : kFloats)
      for (const Shape& s : kShapes) add({op, label(dt, s), {data(dt, s, 0.1, 4.0)}});
  for (DType dt : kFloats) {
    const Shape s{5, 7, 11, 13};
    add({"LeakyRelu", label(dt, s, "alpha=0.2"), {data(dt, s)}, {{"alpha", attr_f(0.2f)}}});
    add({"Elu", label(dt, s), {data(dt, s)}, {{"alpha", attr_f(0.7f)}}});
    add({"Selu", label(dt, s), {data(dt, s)}});
    add({"HardSigmoid", label(dt, s), {data(dt, s, -6, 6)}});
    add({"Gelu", label(dt, s, "approximate=tanh"), {data(dt, s)}, {{"approximate", attr_s("tanh")}}});
    add({"Clip", label(dt, s, "[-0.5,1.5]"), {data(dt, s), scalar(dt, -0.5), scalar(dt, 1.5)}});
    add({"IsNaN", label(dt, s), {data(dt, s)}});
  }

  // Broadcasting binary ops.
  const std::pair<Shape, Shape> bshapes[] = {{{128, 2, 2, 2}, {128, 2, 2, 2}}, {{5, 7, 11, 13}, {11, 1}},
                                             {{5, 1, 11, 13}, {7, 1, 13}}, {{5, 7, 11, 13}, {}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater"})
    for (DType dt : kFloats)
      for (const auto& [a, b] : bshapes)
        add({op, label(dt, a, shape_to_string(b)), {data(dt, a), data(dt, b, op == std::string("Div") ? 0.5 : -2, 2)}});
  for (const char* op : {"GreaterOrEqual", "LessOrEqual", "PRelu"})
    for (DType dt : kFloats)
      for (const auto& [a, b] : bshapes)
        if (std::string(op) != "PRelu" || broadcasts_to(b, a))  // PRelu's slope broadcasts one way, to X
          add({op, label(dt, a, shape_to_string(b)), {data(dt, a), data(dt, b)}});
  // Ties on purpose for the comparisons: integer-valued floats in a small range.
  for (DType dt : kFloats)
    for (const char* op : {"GreaterOrEqual", "LessOrEqual"})
      add({op, label(dt, {7, 13}, "ties"),
           {const_tensor(dt, {7, 13}, index_values(91, -2, 2, 7)), const_tensor(dt, {13}, index_values(13, -2, 2, 8))}});
  for (DType dt : kFloats) {
    add({"Mod", label(dt, {5, 7, 11, 13}, "fmod=1"), {data(dt, {5, 7, 11, 13}, -8, 8), data(dt, {13}, 0.5, 3)}, {{"fmod", attr_i(1)}}});
    add({"IsInf", label(dt, {5, 7, 11, 13}), {data(dt, {5, 7, 11, 13})}});
  }
  for (const char* op : {"And", "Or", "Xor"})
    for (const auto& [a, b] : bshapes) add({op, label(DType::Bool, a, shape_to_string(b)), {data(DType::Bool, a), data(DType::Bool, b)}});
  for (DType dt : kFloats) add({"Pow", label(dt, {5, 7, 11, 13}), {data(dt, {5, 7, 11, 13}, 0.1, 2), data(dt, {13}, -1, 2)}});
  for (DType dt : kFloats)
    add({"Where", label(dt, {5, 7, 11, 13}), {data(DType::Bool, {7, 1, 13}), data(dt, {5, 7, 11, 13}), data(dt, {11, 13})}});

  // Matrix products.
  for (DType dt : kFloats) {
    add({"MatMul", label(dt, {64, 128}, "x [128,96]"), {data(dt, {64, 128}), data(dt, {128, 96})}});
    add({"MatMul", label(dt, {3, 37, 53}, "x [53,71]"), {data(dt, {3, 37, 53}), data(dt, {53, 71})}});
    add({"MatMul", label(dt, {2, 5, 17, 33}, "x [2,5,33,9]"), {data(dt, {2, 5, 17, 33}), data(dt, {2, 5, 33, 9})}});
    add({"Gemm", label(dt, {33, 65}, "transB bias"), {data(dt, {33, 65}), data(dt, {47, 65}), data(dt, {47})},
         {{"transB", attr_i(1)}, {"alpha", attr_f(0.5f)}, {"beta", attr_f(2.0f)}}});
  }

  // Normalisation and softmax along the last and a middle axis.
  for (DType dt : kFloats)
    for (const Shape& s : kShapes) {
      add({"Softmax", label(dt, s, "axis=-1"), {data(dt, s, -8, 8)}, {{"axis", attr_i(-1)}}});
      add({"Softmax", label(dt, s, "axis=1"), {data(dt, s, -8, 8)}, {{"axis", attr_i(1)}}});
      add({"LogSoftmax", label(dt, s, "axis=-1"), {data(dt, s, -8, 8)}, {{"axis", attr_i(-1)}}});
      const int64_t last = s.back();
      add({"LayerNormalization", label(dt, s, "axis=-1"), {data(dt, s), data(dt, {last}), data(dt, {last})},
           {{"axis", attr_i(-1)}, {"epsilon", attr_f(1e-5f)}}});
      add({"ReduceMean", label(dt, s, "axes=[-1]"), {data(dt, s), constant_i64({-1})}, {{"keepdims", attr_i(1)}}, 18});
      add({"ReduceSum", label(dt, s, "axes=[1]"), {data(dt, s), constant_i64({1})}, {{"keepdims", attr_i(0)}}, 18});
      add({"ReduceMax", label(dt, s, "axes=[2,3]"), {data(dt, s), constant_i64({2, 3})}, {{"keepdims", attr_i(1)}}, 18});
      add({"ReduceMin", label(dt, s, "axes=[1,3]"), {data(dt, s), constant_i64({1, 3})}, {{"keepdims", attr_i(0)}}, 18});
      add({"ReduceL2", label(dt, s, "axes=[-1]"), {data(dt, s), constant_i64({-1})}, {{"keepdims", attr_i(1)}}, 18});
      add({"ReduceSumSquare", label(dt, s, "axes=[0]"), {data(dt, s), constant_i64({0})}, {{"keepdims", attr_i(1)}}, 18});
      add({"ReduceProd", label(dt, s, "axes=[2]"), {data(dt, s, 0.5, 1.5), constant_i64({2})}, {{"keepdims", attr_i(0)}}, 18});
    }
  // A run of reduced axes in the middle with many values and a wide inner extent (the
  // [outer, mid, inner] kernel: NHWC spatial means, [N, H, W, C] over axes 1 and 2), inner not a
  // multiple of 32, size-1 axes inside the run, and every op; 7x7 (a ResNet head, mid 49) and 4x5 (mid 20) take it too.
  for (DType dt : kFloats)
    for (const Shape& s : {Shape{3, 20, 17, 40}, Shape{2, 1, 9, 13, 1, 70}, Shape{1, 64, 7, 8}, Shape{3, 7, 7, 96}, Shape{2, 4, 5, 24}}) {
      const std::vector<double> axes = s.size() == 4 ? std::vector<double>{1, 2} : std::vector<double>{1, 2, 3};
      for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare"})
        add({op, label(dt, s, "mid run"), {data(dt, s, -1, 1), constant_i64(axes)}, {{"keepdims", attr_i(1)}}, 18});
    }
  // Mid runs over whole 16-byte vectors of inner take reduce_mid_vec (so do the 7x7, 4x5, 20x17
  // and 64x7 cases above; the inner 70 one stays on reduce_mid): ResNet's head at batch 64, and a
  // mid of 15 (slices of 2 and 1).
  for (DType dt : kFloats)
    for (const Shape& s : {Shape{64, 7, 7, 2048}, Shape{32, 5, 3, 4096}})
      for (const char* op : {"ReduceMean", "ReduceMax", "ReduceL2"})
        add({op, label(dt, s, "mid run, vectors"), {data(dt, s, -1, 1), constant_i64({1, 2})}, {{"keepdims", attr_i(0)}}, 18});
  add({"ReduceMean", label(DType::F16, {256, 7, 7, 2048}, "ResNet head perf"), {data(DType::F16, {256, 7, 7, 2048}), constant_i64({1, 2})},
       {{"keepdims", attr_i(1)}}, 18});

  // Convolution, pooling, batch norm (NCHW).
  for (DType dt : kFloats) {
    add({"Conv", label(dt, {2, 3, 17, 17}, "k3 p1"), {data(dt, {2, 3, 17, 17}), data(dt, {8, 3, 3, 3}, -0.5, 0.5), data(dt, {8})},
         {{"kernel_shape", attr_ints({3, 3})}, {"pads", attr_ints({1, 1, 1, 1})}}});
    add({"Conv", label(dt, {1, 8, 16, 16}, "depthwise s2"), {data(dt, {1, 8, 16, 16}), data(dt, {8, 1, 3, 3}, -0.5, 0.5)},
         {{"kernel_shape", attr_ints({3, 3})}, {"group", attr_i(8)}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}});
    add({"MaxPool", label(dt, {2, 3, 17, 17}, "k3 s2"), {data(dt, {2, 3, 17, 17})},
         {{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}}});
    add({"AveragePool", label(dt, {2, 3, 16, 16}, "k2 s2"), {data(dt, {2, 3, 16, 16})},
         {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}}});
    add({"GlobalAveragePool", label(dt, {2, 7, 11, 13}), {data(dt, {2, 7, 11, 13})}});
    add({"GlobalMaxPool", label(dt, {2, 7, 11, 13}), {data(dt, {2, 7, 11, 13})}});
    add({"BatchNormalization", label(dt, {2, 7, 11, 13}),
         {data(dt, {2, 7, 11, 13}), data(dt, {7}), data(dt, {7}), data(dt, {7}), data(dt, {7}, 0.5, 2)}});
  }

  // Data movement.
  for (DType dt : kFloats) {
    add({"Transpose", label(dt, {5, 7, 11, 13}, "perm=[0,2,3,1]"), {data(dt, {5, 7, 11, 13})}, {{"perm", attr_ints({0, 2, 3, 1})}}});
    add({"Transpose", label(dt, {128, 2, 2, 2}, "perm=[3,2,1,0]"), {data(dt, {128, 2, 2, 2})}, {{"perm", attr_ints({3, 2, 1, 0})}}});
    add({"Concat", label(dt, {5, 7, 11}, "+[5,3,11] axis=1"), {data(dt, {5, 7, 11}), data(dt, {5, 3, 11})}, {{"axis", attr_i(1)}}});
    add({"Slice", label(dt, {5, 7, 11, 13}, "[1:4, ::2]"),
         {data(dt, {5, 7, 11, 13}), constant_i64({1, 0}), constant_i64({4, 13}), constant_i64({0, 3}), constant_i64({1, 2})}});
    add({"Expand", label(dt, {7, 1, 13}, "to [5,7,11,13]"), {data(dt, {7, 1, 13}), constant_i64({5, 7, 11, 13})}});
    add({"Reshape", label(dt, {5, 7, 11, 13}, "to [35,-1]"), {data(dt, {5, 7, 11, 13}), constant_i64({35, -1})}});
    add({"Flatten", label(dt, {5, 7, 11, 13}, "axis=2"), {data(dt, {5, 7, 11, 13})}, {{"axis", attr_i(2)}}});
    add({"Unsqueeze", label(dt, {5, 7}, "axes=[0,3]"), {data(dt, {5, 7}), constant_i64({0, 3})}});
    add({"Squeeze", label(dt, {5, 1, 7, 1}, "axes=[1]"), {data(dt, {5, 1, 7, 1}), constant_i64({1})}});
    add({"Identity", label(dt, {5, 7, 11}), {data(dt, {5, 7, 11})}});
    {
      InputSpec idx = data(DType::I64, {3, 4}, 0, 6.99);
      add({"Gather", label(dt, {7, 13}, "idx [3,4] axis=0"), {data(dt, {7, 13}), idx}});
    }
    add({"Cast", label(dt, {5, 7, 11, 13}, "to f32"), {data(dt, {5, 7, 11, 13})}, {{"to", attr_i(static_cast<int64_t>(DType::F32))}}});
    add({"Cast", label(DType::F32, {5, 7, 11, 13}, fmt::format("to {}", dtype_name(dt))), {data(DType::F32, {5, 7, 11, 13})},
         {{"to", attr_i(static_cast<int64_t>(dt))}}});
    // ops_extra.cpp: Pad (constant, zero and 1.5 fill; negative pads crop), Split (3 outputs), Tile.
    add({"Pad", label(dt, {2, 3, 11, 13}, "pads 1,2 / 0,3 zero"),
         {data(dt, {2, 3, 11, 13}), constant_i64({0, 0, 1, 2, 0, 0, 0, 3})}});
    add({"Pad", label(dt, {5, 7, 11}, "pads 2,-1,1 / 0,1,-2 value 1.5"),
         {data(dt, {5, 7, 11}), constant_i64({2, -1, 1, 0, 1, -2}), scalar(dt, 1.5)},
         {{"mode", attr_s("constant")}}});
    // One index kernel for every mode (unpadded axes merged, the last one moved in 16-byte chunks
    // where it can): Swin's channels-last map padded in H and W, all-zero pads (one copy), a last
    // axis of odd width, an empty input axis (all fill), the perf shape of swin_t b32 stage 1.
    add({"Pad", label(dt, {2, 14, 14, 96}, "NHWC pads H,W 0,0 / 2,3 zero"),
         {data(dt, {2, 14, 14, 96}), constant_i64({0, 0, 0, 0, 0, 2, 3, 0})}});
    add({"Pad", label(dt, {2, 14, 14, 96}, "NHWC all-zero pads"), {data(dt, {2, 14, 14, 96}), constant_i64(std::vector<double>(8, 0.0))}});
    add({"Pad", label(dt, {3, 5, 7}, "pads 0,1,0 / 0,0,0 value -2"),
         {data(dt, {3, 5, 7}), constant_i64({0, 1, 0, 0, 0, 0}), scalar(dt, -2)}});
    add({"Pad", label(dt, {2, 0, 3}, "empty axis pads 0,2,0 / 0,1,0 value 0.5"),
         {data(dt, {2, 0, 3}), constant_i64({0, 2, 0, 0, 1, 0}), scalar(dt, 0.5)}});
    if (dt == DType::F16)
      add({"Pad", label(dt, {32, 56, 56, 96}, "perf swin_t b32 NHWC pads H,W 0,0 / 1,1"),
           {data(dt, {32, 56, 56, 96}), constant_i64({0, 0, 0, 0, 0, 1, 1, 0})}});
    // Edge, reflect and wrap: the index kernel; pads longer than the axis (reflect and wrap
    // repeat periodically), negative pads crop, and an axis of extent 1.
    for (const char* mode : {"edge", "reflect", "wrap"}) {
      add({"Pad", label(dt, {2, 3, 11, 13}, fmt::format("{} pads 1,2 / 0,3", mode)),
           {data(dt, {2, 3, 11, 13}), constant_i64({0, 0, 1, 2, 0, 0, 0, 3})}, {{"mode", attr_s(mode)}}});
      add({"Pad", label(dt, {5, 1, 4}, fmt::format("{} pads 2,3,9 / -1,2,6", mode)),
           {data(dt, {5, 1, 4}), constant_i64({2, 3, 9, -1, 2, 6})}, {{"mode", attr_s(mode)}}});
    }
    {
      Case c{"Split", label(dt, {5, 7, 11}, "axis=1 split [2,4,1]"), {data(dt, {5, 7, 11}), constant_i64({2, 4, 1})},
             {{"axis", attr_i(1)}}};
      c.num_outputs = 3;
      add(c);
    }
    add({"Tile", label(dt, {5, 7, 3}, "repeats [2,1,3]"), {data(dt, {5, 7, 3}), constant_i64({2, 1, 3})}});
    add({"Tile", label(dt, {1, 13}, "repeats [4,2]"), {data(dt, {1, 13}), constant_i64({4, 2})}});
  }
  add_index_cases(cases);
  add_row_cases(cases);
  add_resize_cases(cases);
  add_quant_cases(cases);
  add_conv_transpose_cases(cases);
  add_int_matmul_cases(cases);
  add_einsum_cases(cases);
  add_qconv_cases(cases);
  add_scan_cases(cases);
  add_variadic_cases(cases);
  add_resize_more_cases(cases);
  add_nonzero_cases(cases);
  add_norm_width_cases(cases);
  add_fused_gemm_cases(cases);
  add_arg_cases(cases);
  add_elementwise_cases(cases);
  add_fusedconv_cases(cases);
  add_conv_nd_cases(cases);
  add_attention_cases(cases);
  add_rotary_cases(cases);
  add_version_cases(cases);
  add_nhwc_cases(cases);
  add_depthwise_cases(cases);
  add_int8_cases(cases);
  add_fused_quant_cases(cases);
  return cases;
}

}  // namespace gpuopt::backend_ops
