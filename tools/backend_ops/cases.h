// One backend-ops case: an op (by ONNX name), its attributes, and input specs. Shapes mix powers
// of two with odd sizes; values are fresh random numbers (never zeros).
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "ir/attribute.h"

#include <string>
#include <vector>

namespace gpuopt::backend_ops {

struct InputSpec {
  DType dtype = DType::F32;  // DType::Undefined = absent optional input
  Shape shape;
  bool host_constant = false;  // given as a constant (e.g. Reshape's shape): `values` holds it
  std::vector<double> values;
  double lo = -2.0, hi = 2.0;  // random range for data inputs
};

struct Case {
  std::string op;
  std::string label;  // shown in the report, e.g. "f16 [5,7,11,13]"
  std::vector<InputSpec> inputs;
  AttributeMap attrs;
  int opset = 17;
  int num_outputs = 1;
};

// Every case, for every dtype the op should support on CUDA.
std::vector<Case> all_cases();

}  // namespace gpuopt::backend_ops
