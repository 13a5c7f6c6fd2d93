// The case list: every op the CUDA backend may handle, in f32, f16 and bf16, on shapes that mix
// powers of two with odd sizes. Ops without a CUDA kernel report "unsupported".
#include "cases.h"

#include <fmt/format.h>

namespace gpuopt::backend_ops {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};
const Shape kShapes[] = {{128, 2, 2, 2}, {5, 7, 11, 13}};

Attribute attr_i(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
Attribute attr_f(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
Attribute attr_ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute attr_s(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}

InputSpec data(DType dt, Shape s, double lo = -2, double hi = 2) {
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

std::string label(DType dt, const Shape& s, const std::string& extra = "") {
  return fmt::format("{} {}{}{}", dtype_name(dt), shape_to_string(s), extra.empty() ? "" : " ", extra);
}

}  // namespace

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
    }

  // Convolution, pooling, batch norm (NCHW).
  for (DType dt : kFloats) {
    add({"Conv", label(dt, {2, 3, 17, 17}, "k3 p1"), {data(dt, {2, 3, 17, 17}), data(dt, {8, 3, 3, 3}, -0.5, 0.5), data(dt, {8})},
         {{"pads", attr_ints({1, 1, 1, 1})}}});
    add({"Conv", label(dt, {1, 8, 16, 16}, "depthwise s2"), {data(dt, {1, 8, 16, 16}), data(dt, {8, 1, 3, 3}, -0.5, 0.5)},
         {{"group", attr_i(8)}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}});
    add({"MaxPool", label(dt, {2, 3, 17, 17}, "k3 s2"), {data(dt, {2, 3, 17, 17})},
         {{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}}});
    add({"AveragePool", label(dt, {2, 3, 16, 16}, "k2 s2"), {data(dt, {2, 3, 16, 16})},
         {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}}});
    add({"GlobalAveragePool", label(dt, {2, 7, 11, 13}), {data(dt, {2, 7, 11, 13})}});
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
    // ops_extra.cpp: Pad (constant; zero fill takes the memset path, 1.5 the broadcast fill;
    // negative pads crop), Split (3 outputs), Tile.
    add({"Pad", label(dt, {2, 3, 11, 13}, "pads 1,2 / 0,3 zero"),
         {data(dt, {2, 3, 11, 13}), constant_i64({0, 0, 1, 2, 0, 0, 0, 3})}});
    add({"Pad", label(dt, {5, 7, 11}, "pads 2,-1,1 / 0,1,-2 value 1.5"),
         {data(dt, {5, 7, 11}), constant_i64({2, -1, 1, 0, 1, -2}), scalar(dt, 1.5)},
         {{"mode", attr_s("constant")}}});
    {
      Case c{"Split", label(dt, {5, 7, 11}, "axis=1 split [2,4,1]"), {data(dt, {5, 7, 11}), constant_i64({2, 4, 1})},
             {{"axis", attr_i(1)}}};
      c.num_outputs = 3;
      add(c);
    }
    add({"Tile", label(dt, {5, 7, 3}, "repeats [2,1,3]"), {data(dt, {5, 7, 3}), constant_i64({2, 1, 3})}});
    add({"Tile", label(dt, {1, 13}, "repeats [4,2]"), {data(dt, {1, 13}), constant_i64({4, 2})}});
  }
  return cases;
}

}  // namespace gpuopt::backend_ops
