// Node attributes as ONNX defines them: scalars, lists, tensors and subgraphs (If's branches,
// Loop's and Scan's body).
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpuopt {

class Graph;

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kGraph };
  Kind kind = Kind::kInt;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  // kGraph: the subgraph. Its inputs are its formal inputs, then the outer values it reads
  // (captured at import: the node lists them as extra inputs after its own, in the same order).
  std::shared_ptr<const Graph> g;
};

using AttributeMap = std::map<std::string, Attribute, std::less<>>;

// Attributes built in code (passes, tests): int_attr(3), ints_attr({0, 2, 1, 3}), ...
inline Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute float_attr(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline Attribute string_attr(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}
inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

}  // namespace gpuopt
