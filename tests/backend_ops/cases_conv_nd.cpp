// 1-D and 3-D convolutions on CUDA: Conv and FusedConv of rank 3 run as 2-D convs of unit height,
// rank 5 through cuDNN's N-d descriptors; ConvTranspose likewise (cudnn_conv.h). 1-D: kernels 3
// and 7, strides 1 and 2, symmetric pads, dilations, groups and depthwise, lengths 1 to 3000
// (Whisper's stem: 80 mel channels x 3000 frames). 3-D: pads, strides, dilations, groups,
// depthwise, bias; FusedConv's Relu/identity with a residual; ConvTranspose's output_padding.
#include "cases.h"

namespace gpuopt::backend_ops {
namespace {

const DType kNdFloats[] = {DType::F32, DType::F16, DType::BF16};

// kernel, pads (begin = end), strides, dilations per spatial axis; group.
AttributeMap conv_attrs(std::vector<int64_t> k, std::vector<int64_t> pad, std::vector<int64_t> stride,
                        std::vector<int64_t> dil, int64_t group) {
  std::vector<int64_t> pads = pad;
  pads.insert(pads.end(), pad.begin(), pad.end());
  return {{"kernel_shape", attr_ints(k)},
          {"pads", attr_ints(pads)},
          {"strides", attr_ints(stride)},
          {"dilations", attr_ints(dil)},
          {"group", attr_i(group)}};
}

struct Conv1d {
  int64_t n, c, m, len, k, pad, stride, dil, group;
  bool bias;
  const char* what;
};

}  // namespace

void add_conv_nd_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  const Conv1d conv1d[] = {
      {1, 80, 64, 3000, 3, 1, 1, 1, 1, true, "1-D k3 p1 (Whisper conv1), L 3000"},
      {2, 64, 64, 3000, 3, 1, 2, 1, 1, true, "1-D k3 p1 s2 (Whisper conv2), L 3000"},
      {2, 5, 7, 1, 3, 1, 1, 1, 1, true, "1-D k3 p1, L 1"},
      {1, 6, 4, 2, 3, 1, 2, 1, 1, false, "1-D k3 p1 s2, L 2"},
      {2, 8, 12, 257, 7, 3, 1, 1, 1, true, "1-D k7 p3, L 257"},
      {1, 8, 8, 300, 7, 6, 2, 2, 1, false, "1-D k7 p6 s2 dilation 2, L 300"},
      {2, 12, 16, 129, 7, 3, 2, 1, 4, true, "1-D k7 p3 s2 group 4, L 129"},
      {1, 16, 16, 1000, 3, 1, 1, 1, 16, true, "1-D k3 p1 depthwise, L 1000"},
      {1, 16, 16, 999, 7, 3, 2, 1, 16, false, "1-D k7 p3 s2 depthwise, L 999"},
      {1, 4, 6, 7, 7, 0, 1, 1, 1, true, "1-D k7 no pad, L 7 (one output)"},
      {3, 3, 5, 64, 3, 2, 1, 2, 1, true, "1-D k3 p2 dilation 2, L 64"},
  };
  for (DType dt : kNdFloats) {
    for (const Conv1d& s : conv1d) {
      std::vector<InputSpec> in{data(dt, {s.n, s.c, s.len}), data(dt, {s.m, s.c / s.group, s.k}, -0.5, 0.5)};
      if (s.bias) in.push_back(data(dt, {s.m}));
      cases.push_back({"Conv", label(dt, {s.n, s.c, s.len}, s.what), in,
                       conv_attrs({s.k}, {s.pad}, {s.stride}, {s.dil}, s.group)});
    }
    // FusedConv of a 1-D conv: bias + Relu (fuse_conv_activation's form after conv1d is off), and
    // identity with a residual.
    {
      AttributeMap relu = conv_attrs({3}, {1}, {1}, {1}, 1);
      relu["activation"] = attr_s("Relu");
      cases.push_back({"FusedConv", label(dt, {2, 16, 500}, "1-D k3 p1 bias relu"),
                       {data(dt, {2, 16, 500}), data(dt, {24, 16, 3}, -0.5, 0.5), data(dt, {24})}, relu});
      AttributeMap id = conv_attrs({7}, {3}, {2}, {1}, 2);
      cases.push_back({"FusedConv", label(dt, {1, 8, 101}, "1-D k7 p3 s2 group 2 residual identity"),
                       {data(dt, {1, 8, 101}), data(dt, {10, 4, 7}, -0.5, 0.5), none, data(dt, {1, 10, 51})}, id});
    }
    // ConvTranspose 1-D: the upsampling of vocoders and 1-D U-Nets.
    cases.push_back({"ConvTranspose", label(dt, {2, 8, 50}, "1-D k3 s2 p1 out_pad 1 bias"),
                     {data(dt, {2, 8, 50}), data(dt, {8, 6, 3}, -0.5, 0.5), data(dt, {6})},
                     {{"kernel_shape", attr_ints({3})},
                      {"strides", attr_ints({2})},
                      {"pads", attr_ints({1, 1})},
                      {"output_padding", attr_ints({1})}}});
    cases.push_back({"ConvTranspose", label(dt, {1, 6, 33}, "1-D k4 s2 p1 group 2"),
                     {data(dt, {1, 6, 33}), data(dt, {6, 2, 4}, -0.5, 0.5)},
                     {{"kernel_shape", attr_ints({4})}, {"strides", attr_ints({2})}, {"pads", attr_ints({1, 1})},
                      {"group", attr_i(2)}}});
    cases.push_back({"ConvTranspose", label(dt, {1, 4, 1}, "1-D k7 dilation 2, L 1"),
                     {data(dt, {1, 4, 1}), data(dt, {4, 3, 7}, -0.5, 0.5), data(dt, {3})},
                     {{"kernel_shape", attr_ints({7})}, {"dilations", attr_ints({2})}}});
    cases.push_back({"ConvTranspose", label(dt, {1, 16, 750}, "1-D k8 s4 p2, L 750"),
                     {data(dt, {1, 16, 750}), data(dt, {16, 8, 8}, -0.5, 0.5)},
                     {{"kernel_shape", attr_ints({8})}, {"strides", attr_ints({4})}, {"pads", attr_ints({2, 2})}}});

    // 3-D Conv: video and volumetric models (NCDHW).
    cases.push_back({"Conv", label(dt, {2, 3, 8, 9, 10}, "3-D k3 p1 bias"),
                     {data(dt, {2, 3, 8, 9, 10}), data(dt, {8, 3, 3, 3, 3}, -0.5, 0.5), data(dt, {8})},
                     conv_attrs({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1)});
    cases.push_back({"Conv", label(dt, {1, 4, 9, 8, 7}, "3-D k3 p1 s2"),
                     {data(dt, {1, 4, 9, 8, 7}), data(dt, {6, 4, 3, 3, 3}, -0.5, 0.5)},
                     conv_attrs({3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}, 1)});
    cases.push_back({"Conv", label(dt, {1, 8, 6, 7, 8}, "3-D k(1,3,3) p(0,1,1) group 2"),
                     {data(dt, {1, 8, 6, 7, 8}), data(dt, {12, 4, 1, 3, 3}, -0.5, 0.5), data(dt, {12})},
                     conv_attrs({1, 3, 3}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, 2)});
    cases.push_back({"Conv", label(dt, {2, 8, 5, 6, 7}, "3-D k3 p1 depthwise"),
                     {data(dt, {2, 8, 5, 6, 7}), data(dt, {8, 1, 3, 3, 3}, -0.5, 0.5)},
                     conv_attrs({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 8)});
    cases.push_back({"Conv", label(dt, {1, 3, 9, 10, 11}, "3-D k3 p2 dilation 2 s(1,2,2)"),
                     {data(dt, {1, 3, 9, 10, 11}), data(dt, {5, 3, 3, 3, 3}, -0.5, 0.5), data(dt, {5})},
                     conv_attrs({3, 3, 3}, {2, 2, 2}, {1, 2, 2}, {2, 2, 2}, 1)});
    cases.push_back({"Conv", label(dt, {1, 3, 16, 32, 32}, "3-D k(2,4,4) s(2,4,4) patch embed"),
                     {data(dt, {1, 3, 16, 32, 32}), data(dt, {32, 3, 2, 4, 4}, -0.5, 0.5), data(dt, {32})},
                     conv_attrs({2, 4, 4}, {0, 0, 0}, {2, 4, 4}, {1, 1, 1}, 1)});
    {
      AttributeMap relu = conv_attrs({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1);
      relu["activation"] = attr_s("Relu");
      cases.push_back({"FusedConv", label(dt, {1, 4, 6, 7, 8}, "3-D k3 p1 bias relu"),
                       {data(dt, {1, 4, 6, 7, 8}), data(dt, {6, 4, 3, 3, 3}, -0.5, 0.5), data(dt, {6})}, relu});
      AttributeMap id = conv_attrs({3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}, 2);
      cases.push_back({"FusedConv", label(dt, {2, 4, 7, 6, 5}, "3-D k3 p1 s2 group 2 bias residual identity"),
                       {data(dt, {2, 4, 7, 6, 5}), data(dt, {6, 2, 3, 3, 3}, -0.5, 0.5), data(dt, {6}),
                        data(dt, {2, 6, 4, 3, 3})},
                       id});
    }
    cases.push_back({"ConvTranspose", label(dt, {1, 4, 3, 4, 5}, "3-D k2 s2 (upsampling)"),
                     {data(dt, {1, 4, 3, 4, 5}), data(dt, {4, 2, 2, 2, 2}, -0.5, 0.5)},
                     {{"kernel_shape", attr_ints({2, 2, 2})}, {"strides", attr_ints({2, 2, 2})}}});
    cases.push_back({"ConvTranspose", label(dt, {2, 4, 4, 5, 3}, "3-D k3 s2 p1 out_pad 1 group 2 bias"),
                     {data(dt, {2, 4, 4, 5, 3}), data(dt, {4, 3, 3, 3, 3}, -0.5, 0.5), data(dt, {6})},
                     {{"kernel_shape", attr_ints({3, 3, 3})},
                      {"strides", attr_ints({2, 2, 2})},
                      {"pads", attr_ints({1, 1, 1, 1, 1, 1})},
                      {"output_padding", attr_ints({1, 1, 1})},
                      {"group", attr_i(2)}}});
  }
}

}  // namespace gpuopt::backend_ops
