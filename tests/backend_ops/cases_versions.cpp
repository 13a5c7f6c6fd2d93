// The older forms of ops whose CUDA kernel is registered by opset range (GPUOPT_CUDA_OP_RANGE):
// each range has a case at an opset inside it, so `coverage` sees every form and `test` runs it
// against the CPU form of the same opset.
#include "cases.h"

namespace gpuopt::backend_ops {

void add_version_cases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    // Softmax-11: coerced to 2-D at `axis` (default 1): one softmax over the trailing block.
    add({"Softmax", label(dt, {5, 7, 11}, "opset 11 axis default"), {data(dt, {5, 7, 11}, -8, 8)}, {}, 11});
    add({"Softmax", label(dt, {5, 7, 11}, "opset 11 axis=2"), {data(dt, {5, 7, 11}, -8, 8)}, {{"axis", attr_i(2)}}, 11});
    add({"LogSoftmax", label(dt, {5, 7, 11}, "opset 11 axis=1"), {data(dt, {5, 7, 11}, -8, 8)}, {{"axis", attr_i(1)}}, 11});
    // Slice-9: starts/ends/axes attributes.
    add({"Slice", label(dt, {5, 7, 11}, "opset 9 attrs [1:4, 2:]"), {data(dt, {5, 7, 11})},
         {{"starts", attr_ints({1, 2})}, {"ends", attr_ints({4, 100})}, {"axes", attr_ints({0, 2})}}, 9});
    // Pad-10: pads and value attributes.
    add({"Pad", label(dt, {2, 3, 11}, "opset 10 attrs value 1.5"), {data(dt, {2, 3, 11})},
         {{"pads", attr_ints({0, 1, 2, 0, 0, 3})}, {"value", attr_f(1.5f)}}, 10});
    add({"Pad", label(dt, {2, 3, 11}, "opset 10 attrs edge"), {data(dt, {2, 3, 11})},
         {{"pads", attr_ints({0, 1, 2, 0, 0, 3})}, {"mode", attr_s("edge")}}, 10});
    // Clip-6: min/max attributes.
    add({"Clip", label(dt, {5, 7, 11}, "opset 10 attrs [-0.5,1.5]"), {data(dt, {5, 7, 11})},
         {{"min", attr_f(-0.5f)}, {"max", attr_f(1.5f)}}, 10});
  }
}

}  // namespace gpuopt::backend_ops
