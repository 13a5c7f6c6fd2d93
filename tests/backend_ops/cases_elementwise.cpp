// Cases for the elementwise and layout fast paths (elementwise_plan.h, layout_plan.h): each
// broadcast pattern the host plan tells apart, sizes that leave a scalar tail after the 16-byte
// vectors, integer types and the bool outputs of comparisons; every Transpose kind; and the
// "perf" cases, BERT-base sizes at batch 32 x 128 tokens plus ones larger than the H200's 50 MB
// L2, for `backend_ops perf --case perf`.
#include "cases.h"

#include <fmt/format.h>

// Cases list only the members they need; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpuopt::backend_ops {
namespace {

Attribute to(DType dt) {
  return attr_i(static_cast<int64_t>(dt));
}

// Random range of a data input: integers small enough that Mul cannot overflow i8, unsigned
// ones never negative; divisors never zero.
InputSpec operand(DType dt, Shape s, bool divisor) {
  if (dtype_is_float(dt)) return divisor ? data(dt, std::move(s), 0.5, 2) : data(dt, std::move(s));
  if (dt == DType::U8) return data(dt, std::move(s), divisor ? 1 : 0, 11.99);
  return data(dt, std::move(s), divisor ? 1 : -10, 10.99);
}

void add_binary_path_cases(std::vector<Case>& cases) {
  // {a, b, path the plan takes for f32 (the comment)}
  const std::pair<Shape, Shape> shapes[] = {
      {{5, 7, 11, 13}, {5, 7, 11, 13}},  // same shape, 5005 elements: vectors + tail of every width
      {{3}, {3}},                        // fewer elements than one vector: tail only
      {{}, {5, 7, 11, 13}},              // scalar a
      {{6, 5, 32}, {32}},                // row broadcast, vector loads of the row
      {{6, 5, 32}, {5, 32}},             // row of two axes
      {{32}, {6, 5, 32}},                // the mirror: a is the row
      {{6, 5, 32}, {6, 5, 1}},           // column: one b element per vector
      {{6, 5, 1}, {6, 5, 32}},           // the mirror
      {{3, 8, 5, 16}, {8, 1, 1}},        // channel [C,1,1] over NCHW
      {{6, 5, 13}, {13}},                // row of 13: not whole vectors, general 32-bit
      {{6, 1, 32}, {5, 1}},              // both broadcast, innermost whole vectors: per-vector offsets
      {{4, 3, 8, 16}, {4, 1, 1, 16}},    // attention-mask pattern [B,1,1,S] over [B,H,S,S]
      {{6, 1, 13}, {5, 1}},              // both broadcast, innermost 13: general 32-bit
      {{2, 3, 1, 5, 1, 7, 1, 3}, {1, 3, 4, 1, 2, 1, 3, 1}},  // rank 8, alternating
  };
  const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::I8, DType::U8};
  for (DType dt : kTypes) {
    std::vector<const char*> ops = {"Add", "Mul", "Max", "Equal", "Less", "GreaterOrEqual"};
    ops.push_back("Sub");  // u8 wraps below zero on both sides (the CPU subtracts unsigned)
    ops.push_back("Div");
    if (dtype_is_integer(dt)) ops.push_back("Mod");
    for (const char* op : ops)
      for (const auto& [a, b] : shapes) {
        const bool div = op == std::string("Div") || op == std::string("Mod");
        cases.push_back(
            {op, label(dt, a, shape_to_string(b) + " path"), {operand(dt, a, false), operand(dt, b, div)}, {}, 13});
      }
  }
  for (const char* op : {"And", "Or", "Xor"})
    for (const auto& [a, b] :
         {std::pair<Shape, Shape>{{5, 7, 11, 13}, {5, 7, 11, 13}}, {{6, 5, 32}, {32}}, {{6, 5, 32}, {6, 5, 1}}})
      cases.push_back(
          {op, label(DType::Bool, a, shape_to_string(b) + " path"), {data(DType::Bool, a), data(DType::Bool, b)}});
}

void add_unary_path_cases(std::vector<Case>& cases) {
  const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};
  for (DType dt : kFloats)
    for (const Shape& s : {Shape{7, 129}, Shape{3}, Shape{8, 1024}})
      for (const char* op : {"Erf", "Relu", "Sigmoid", "Neg"})
        cases.push_back({op, label(dt, s, "path"), {data(dt, s)}});
  // Cast between every pair the graph uses, with tails; integer targets get integral ranges.
  const std::pair<DType, DType> casts[] = {
      {DType::F32, DType::F16},  {DType::F16, DType::F32},  {DType::F32, DType::BF16}, {DType::BF16, DType::F32},
      {DType::F16, DType::BF16}, {DType::F32, DType::I32},  {DType::I32, DType::F32},  {DType::I64, DType::I32},
      {DType::I32, DType::I64},  {DType::U8, DType::F32},   {DType::F16, DType::I8},   {DType::I64, DType::F16},
      {DType::F32, DType::Bool}, {DType::Bool, DType::F32}, {DType::I64, DType::Bool}, {DType::Bool, DType::I64},
      {DType::F16, DType::U8},
  };
  for (const auto& [from, dst] : casts)
    for (const Shape& s : {Shape{5, 7, 11, 13}, Shape{4, 64}, Shape{5}}) {
      const bool b = from == DType::Bool;
      const double lo = b ? -1 : (dst == DType::U8 || from == DType::U8 ? 0 : -100), hi = b ? 1 : 100;
      InputSpec x = data(from, s, lo, hi);
      x.zero_fraction = 0.25;  // zeros for the casts to bool
      cases.push_back({"Cast", label(from, s, fmt::format("to {} path", dtype_name(dst))), {x}, {{"to", to(dst)}}});
    }
}

void add_transpose_path_cases(std::vector<Case>& cases) {
  struct T {
    Shape shape;
    std::vector<int64_t> perm;
    const char* kind;
  };
  const T ts[] = {
      {{3, 5, 7, 16}, {0, 2, 1, 3}, "rows"},
      {{3, 5, 7, 13}, {0, 2, 1, 3}, "rows odd"},
      {{2, 3, 4, 5, 6}, {1, 0, 3, 2, 4}, "rows rank 5"},
      {{4, 6, 40, 36}, {0, 1, 3, 2}, "tiled partial tiles"},
      {{33, 65}, {1, 0}, "tiled 2-D"},
      {{5, 9, 11, 13}, {0, 2, 3, 1}, "tiled"},
      {{9, 10, 11, 12}, {3, 1, 0, 2}, "tiled two batch axes"},
      {{1, 5, 1, 7}, {3, 2, 1, 0}, "interleave (size-1 axes dropped: [5,7] -> [7,5])"},
      {{128, 2, 2, 2}, {3, 2, 1, 0}, "strided (short sides)"},
      // NCHW -> NHWC of 2-8 channels (an image input): 16-byte runs where the plane allows,
      // else one pixel per thread (odd planes, or runs that do not divide them).
      {{2, 3, 8, 16}, {0, 2, 3, 1}, "interleave C=3"},
      {{2, 3, 7, 9}, {0, 2, 3, 1}, "interleave C=3 odd plane"},
      {{1, 4, 5, 24}, {0, 2, 3, 1}, "interleave C=4 N=1"},
      {{3, 2, 16, 16}, {0, 2, 3, 1}, "interleave C=2"},
      {{2, 8, 4, 8}, {0, 2, 3, 1}, "interleave C=8"},
      {{2, 5, 6, 6}, {0, 2, 3, 1}, "interleave C=5 plane 36"},
      {{3, 7, 40}, {0, 2, 1}, "interleave C=7 rank 3"},
      {{6, 1, 4}, {1, 0, 2}, "copy"},
      {{4, 9, 10}, {}, "reverse (no perm)"},
  };
  const DType kTypes[] = {DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool};
  for (DType dt : kTypes)
    for (const T& t : ts) {
      Case c{"Transpose",
             label(dt, t.shape, fmt::format("perm={} {}", shape_to_string(t.perm), t.kind)),
             {data(dt, t.shape, dt == DType::Bool ? -1 : 0, dt == DType::Bool ? 1 : 100)}};
      if (!t.perm.empty()) c.attrs["perm"] = attr_ints(t.perm);
      cases.push_back(std::move(c));
    }
}

// Gather in 16-byte chunks of whole rows (or narrower ones), negative indices; Where's
// three-way broadcast on 32-bit index math.
void add_gather_where_cases(std::vector<Case>& cases) {
  const DType kTypes[] = {DType::F32, DType::F16, DType::I64, DType::U8};
  for (DType dt : kTypes) {
    cases.push_back({"Gather",
                     label(dt, {50, 64}, "idx [3,5] axis=0 path"),
                     {data(dt, {50, 64}, 0, 100), data(DType::I64, {3, 5}, -50, 49.99)}});
    cases.push_back({"Gather",
                     label(dt, {6, 50, 7}, "idx i32 [4] axis=1 path"),
                     {data(dt, {6, 50, 7}, 0, 100), data(DType::I32, {4}, -50, 49.99)},
                     {{"axis", attr_i(1)}}});
    cases.push_back({"Gather",
                     label(dt, {9, 24}, "idx [] axis=0 path"),
                     {data(dt, {9, 24}, 0, 100), const_tensor(DType::I64, {}, {-2})}});
    cases.push_back({"Where",
                     label(dt, {4, 3, 8, 16}, "cond [4,1,1,16] a [] path"),
                     {data(DType::Bool, {4, 1, 1, 16}), data(dt, {}, 0, 100), data(dt, {4, 3, 8, 16}, 0, 100)}});
    cases.push_back({"Where",
                     label(dt, {2, 3, 4, 5, 6, 7}, "cond [3,1,5,1,7] b [] path"),
                     {data(DType::Bool, {3, 1, 5, 1, 7}), data(dt, {2, 1, 4, 1, 6, 1}, 0, 100), data(dt, {}, 0, 100)}});
  }
}

// BERT-base at batch 32, sequence 128 (hidden 768, 12 heads of 64, FFN 3072), and a same-shape
// Add larger than the L2 so DRAM is what is measured.
void add_perf_cases(std::vector<Case>& cases) {
  const Shape h{32, 128, 768};
  for (DType dt : {DType::F16, DType::F32}) {
    auto add = [&](const char* op, std::vector<InputSpec> in, const std::string& what, AttributeMap attrs = {}) {
      Shape big = in[0].shape;  // the label shows the largest input
      for (const InputSpec& x : in)
        if (shape_numel(x.shape) > shape_numel(big)) big = x.shape;
      cases.push_back(
          {op, label(dt, big, what.empty() ? "perf" : what + " perf"), std::move(in), std::move(attrs), 13});
    };
    // The FFN's GELU, as exported: x / sqrt(2), erf, 1 + erf, x * that, * 0.5; plus its bias.
    const Shape f{32, 128, 3072};
    add("Div", {data(dt, f), scalar(dt, 1.4142135)}, "/ scalar");
    add("Add", {scalar(dt, 1.0), data(dt, f)}, "scalar +");
    add("Mul", {data(dt, f), data(dt, f)}, "x same");
    add("Add", {data(dt, f), data(dt, {3072})}, "+ bias [3072]");
    // Attention: scores / sqrt(64), + the mask [B,1,1,S].
    const Shape att{32, 12, 128, 128};
    add("Div", {data(dt, att), scalar(dt, 8.0)}, "/ scalar");
    add("Add", {data(dt, att), data(dt, {32, 1, 1, 128})}, "+ mask [32,1,1,128]");
    add("Add", {data(dt, h), data(dt, h)}, "+ same");
    add("Add", {data(dt, h), data(dt, {768})}, "+ bias [768]");
    add("Add", {data(dt, {16, 512, 1024}), data(dt, {16, 512, 1024})}, "+ same (> L2)");
    add("Mul", {data(dt, h), scalar(dt, 0.5)}, "x scalar");
    add("Div", {data(dt, h), data(dt, {32, 128, 1}, 0.5, 2)}, "/ [32,128,1]");
    add("Erf", {data(dt, {32, 128, 3072})}, "");
    add("Transpose", {data(dt, {32, 128, 12, 64})}, "perm=[0,2,1,3]", {{"perm", attr_ints({0, 2, 1, 3})}});
    add("Transpose", {data(dt, {32, 12, 128, 64})}, "perm=[0,1,3,2]", {{"perm", attr_ints({0, 1, 3, 2})}});
    add("Transpose", {data(dt, {2048, 4096})}, "perm=[1,0]", {{"perm", attr_ints({1, 0})}});
    // A 512-row table (position embeddings): GB/s counts the whole table as read, so a small one.
    add("Gather", {data(dt, {512, 768}), data(DType::I64, {32, 128}, 0, 511.99)}, "embedding rows idx [32,128]");
    add("Where", {data(DType::Bool, {32, 1, 1, 128}), data(dt, att), scalar(dt, -10000.0)}, "mask cond [32,1,1,128]");
  }
  // ResNet-50's input at batch 256 going channels-last (C=3: the interleave kernel), 77 MB each way.
  const Shape img{256, 3, 224, 224};
  cases.push_back({"Transpose", label(DType::F16, img, "perm=[0,2,3,1] (ResNet input) perf"), {data(DType::F16, img)},
                   {{"perm", attr_ints({0, 2, 3, 1})}}, 13});
  cases.push_back({"Cast", label(DType::F32, h, "to f16 perf"), {data(DType::F32, h)}, {{"to", to(DType::F16)}}});
  cases.push_back({"Cast", label(DType::F16, h, "to f32 perf"), {data(DType::F16, h)}, {{"to", to(DType::F32)}}});
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& cases) {
  add_binary_path_cases(cases);
  add_unary_path_cases(cases);
  add_transpose_path_cases(cases);
  add_gather_where_cases(cases);
  add_perf_cases(cases);
}

}  // namespace gpuopt::backend_ops
