// FusedConv (com.microsoft): y = act(conv(x, w) + b + z) through cudnnConvolutionBiasActivationForward.
// Every combination the kernel branches on: bias or the workspace's zero bias, z or alpha2 = 0,
// Relu or identity (identity needs the precomputed-GEMM algorithm), strides, groups, 1x1
// bottleneck convs, odd channel counts, gpuopt's HardSwish/Swish epilogues; Sigmoid shows the
// CPU fallback.
#include "cases.h"

namespace gpuopt::backend_ops {
namespace {

const DType kFusedFloats[] = {DType::F32, DType::F16, DType::BF16};

AttributeMap conv(std::vector<int64_t> k, int64_t pad, int64_t stride, int64_t group, const std::string& act) {
  AttributeMap a{{"kernel_shape", attr_ints(k)},
                 {"pads", attr_ints({pad, pad, pad, pad})},
                 {"strides", attr_ints({stride, stride})},
                 {"group", attr_i(group)}};
  if (!act.empty()) a["activation"] = attr_s(act);
  return a;
}

}  // namespace

void add_fusedconv_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  for (DType dt : kFusedFloats) {
    // x [2,5,9,11] -> 7 channels, 3x3 pad 1: y [2,7,9,11].
    const Shape x{2, 5, 9, 11}, y{2, 7, 9, 11};
    auto w = [&] { return data(dt, {7, 5, 3, 3}, -0.5, 0.5); };
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 bias z relu"),
                     {data(dt, x), w(), data(dt, {7}), data(dt, y)},
                     conv({3, 3}, 1, 1, 1, "Relu")});
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 bias relu"),
                     {data(dt, x), w(), data(dt, {7})},
                     conv({3, 3}, 1, 1, 1, "Relu")});
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 no-bias z relu"),
                     {data(dt, x), w(), none, data(dt, y)},
                     conv({3, 3}, 1, 1, 1, "Relu")});
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 bias z identity"),
                     {data(dt, x), w(), data(dt, {7}), data(dt, y)},
                     conv({3, 3}, 1, 1, 1, "")});
    cases.push_back(
        {"FusedConv", label(dt, x, "k3 p1 no-bias identity"), {data(dt, x), w()}, conv({3, 3}, 1, 1, 1, "")});
    // gpuopt's HardSwish and Swish epilogues (conv + one pass of our own), NCHW.
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 bias z swish"),
                     {data(dt, x), w(), data(dt, {7}), data(dt, y)},
                     conv({3, 3}, 1, 1, 1, "Swish")});
    cases.push_back({"FusedConv",
                     label(dt, x, "k3 p1 no-bias hardswish"),
                     {data(dt, x), w()},
                     conv({3, 3}, 1, 1, 1, "HardSwish")});
    // ResNet shapes in small: the stride-2 downsampling conv and the 1x1 bottleneck expansion.
    cases.push_back({"FusedConv",
                     label(dt, {2, 16, 17, 17}, "k3 s2 p1 bias z relu"),
                     {data(dt, {2, 16, 17, 17}, -1, 1), data(dt, {32, 16, 3, 3}, -0.25, 0.25), data(dt, {32}),
                      data(dt, {2, 32, 9, 9})},
                     conv({3, 3}, 1, 2, 1, "Relu")});
    cases.push_back({"FusedConv",
                     label(dt, {4, 64, 7, 7}, "1x1 ->256 bias z relu"),
                     {data(dt, {4, 64, 7, 7}, -1, 1), data(dt, {256, 64, 1, 1}, -0.25, 0.25), data(dt, {256}),
                      data(dt, {4, 256, 7, 7})},
                     conv({1, 1}, 0, 1, 1, "Relu")});
    cases.push_back(
        {"FusedConv",
         label(dt, {1, 8, 10, 10}, "k3 p1 group 4 bias z relu"),
         {data(dt, {1, 8, 10, 10}), data(dt, {12, 2, 3, 3}, -0.5, 0.5), data(dt, {12}), data(dt, {1, 12, 10, 10})},
         conv({3, 3}, 1, 1, 4, "Relu")});
    cases.push_back({"FusedConv",
                     label(dt, {3, 3, 13, 13}, "k5 p2 no-bias z identity"),
                     {data(dt, {3, 3, 13, 13}), data(dt, {5, 3, 5, 5}, -0.5, 0.5), none, data(dt, {3, 5, 13, 13})},
                     conv({5, 5}, 2, 1, 1, "")});
  }
  // Activations other than Relu/identity have no cuDNN epilogue: the CUDA kernel declines them.
  cases.push_back({"FusedConv",
                   label(DType::F32, {1, 3, 8, 8}, "k3 p1 sigmoid (CPU fallback)"),
                   {data(DType::F32, {1, 3, 8, 8}), data(DType::F32, {4, 3, 3, 3}, -0.5, 0.5), data(DType::F32, {4})},
                   conv({3, 3}, 1, 1, 1, "Sigmoid")});
}

}  // namespace gpuopt::backend_ops
