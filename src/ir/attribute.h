// Node attributes as ONNX defines them (scalars, lists, tensors; subgraphs are not supported).
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuopt {

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings };
  Kind kind = Kind::kInt;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

using AttributeMap = std::map<std::string, Attribute, std::less<>>;

}  // namespace gpuopt
