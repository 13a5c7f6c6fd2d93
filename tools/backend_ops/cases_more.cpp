// More cases: variadic Sum/Mean/Min/Max (1 to 10 inputs, each broadcast differently, the first
// one smaller than the output), Resize cubic and antialias, and NonZero at several densities.
#include "cases.h"

#include <fmt/format.h>

// Cases list only the members they need; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpuopt::backend_ops {
namespace {

std::string shapes_label(const std::vector<Shape>& shapes) {
  std::string s;
  for (const Shape& sh : shapes) s += (s.empty() ? "" : " ") + shape_to_string(sh);
  return s;
}

}  // namespace

// ops_binary.cpp: Sum/Mean (floats) and Min/Max (floats and integers) with 1..10 inputs. The
// output is the broadcast of all inputs; in "first broadcast" the first input is smaller than the
// output, so the kernel must broadcast it too. 10 inputs take two groups of the kernel (8 + 2).
void add_variadic_cases(std::vector<Case>& cases) {
  const std::vector<std::vector<Shape>> sets = {
      {{128, 2, 2, 2}},
      {{128, 2, 2, 2}, {2, 1, 2}},
      {{5, 7, 11, 13}, {11, 13}, {7, 1, 13}},
      {{7, 1, 1}, {5, 1, 11, 13}, {13}, {1, 7, 11, 1}},
      {{3, 1, 8}, {1, 4, 1}, {}, {3, 4, 8}},
      {{64, 3}, {3}, {64, 1}, {1, 3}, {64, 3}, {}, {1, 1}, {64, 3}, {3}, {64, 1}},
  };
  const DType kMinMax[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::I8, DType::U8};
  for (const char* op : {"Sum", "Mean", "Min", "Max"}) {
    const bool ints = op == std::string("Min") || op == std::string("Max");
    for (DType dt : kMinMax) {
      if (!ints && !dtype_is_float(dt)) continue;
      for (const auto& set : sets) {
        Case c{op, label(dt, set[0], fmt::format("{} inputs: {}", set.size(), shapes_label(set)))};
        const double lo = dt == DType::U8 ? 0 : (dtype_is_float(dt) ? -2 : -50), hi = dtype_is_float(dt) ? 2 : 50;
        for (const Shape& s : set) c.inputs.push_back(data(dt, s, lo, hi));
        c.opset = 13;
        cases.push_back(std::move(c));
      }
    }
  }
}

}  // namespace gpuopt::backend_ops
