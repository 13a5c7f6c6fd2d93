// The one helper header of the op tests (tests/ops_*, tests/backend_ops): a one-node graph,
// attribute builders, dtype tolerances and the comparison rule. No GoogleTest here, so the
// backend-ops harness (a plain program) shares it; each folder's own header adds its random
// inputs and gtest assertions on top.
#pragma once

#include "core/tensor.h"
#include "ir/attribute.h"
#include "ir/graph.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::op_test {

// Random source of the op tests' fresh inputs (a new seed each run; the tests print what failed).
inline std::mt19937_64& rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}

// The case folders (those holding a case.json) under `dir`, sorted; none when it is missing.
inline std::vector<std::string> case_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (std::filesystem::exists(e.path() / "case.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One node of `op` reading values 0..n_in-1 and writing n_in..n_in+n_out-1 (eval_node's layout).
inline Node make_node(Op op, size_t n_in, size_t n_out = 1, AttributeMap attrs = {}, std::string name = "n0") {
  Node n;
  n.op = op;
  n.name = std::move(name);
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back(static_cast<ValueId>(n_in + i));
  n.attrs = std::move(attrs);
  return n;
}

inline Attribute attr_i(int64_t v) { return int_attr(v); }
inline Attribute attr_f(float v) { return float_attr(v); }
inline Attribute attr_s(std::string v) { return string_attr(std::move(v)); }
inline Attribute attr_ints(std::vector<int64_t> v) { return ints_attr(std::move(v)); }
inline Attribute attr_t(Tensor t) {
  Attribute a;
  a.kind = Attribute::Kind::kTensor;
  a.t = std::move(t);
  return a;
}

struct Tolerance {
  double abs, rel;
};
// ONNX Runtime's tolerances by dtype (CONVENTIONS.md); integers and bool are exact.
inline Tolerance tolerance(DType dt) {
  switch (dt) {
    case DType::F32:
      return {1e-5, 1e-4};
    case DType::F64:
      return {1e-12, 1e-12};
    case DType::F16:
      return {2.5e-3, 1e-3};
    case DType::BF16:
      return {2e-2, 1e-2};
    default:
      return {0, 0};
  }
}

// True when got matches want: NaN with NaN, Inf with Inf of the same sign, else within tolerance.
inline bool close(double got, double want, Tolerance tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.abs + tol.rel * std::fabs(want);
}

}  // namespace gpuopt::op_test
