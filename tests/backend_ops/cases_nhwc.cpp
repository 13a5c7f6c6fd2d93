// Channels-last ops of the layout_nhwc pass (ai.gpuopt): NhwcFusedConv through cuDNN's NHWC
// descriptors (x/z/y [N,H,W,C], w [M,kH,kW,C/group]), NhwcMaxPool through gpuopt's kernel, and
// the nhwc_entry pass's ToNhwc.
// The edges: odd channel counts (cuDNN's tensor-core kernels want multiples of 8), the C=3 stem
// conv, grouped and depthwise convs, stride 2, every bias/z/activation combination, and max
// pools over negative values with padding (a padded tap must never win the maximum), every path of
// the channels-last kernel and, under GPUOPT_POOL_KERNEL=cudnn, cuDNN's pooling. The CPU
// reference is the NCHW op between transposes, so each case also checks the weight layout.
#include "cases.h"

namespace gpuopt::backend_ops {
namespace {

const DType kHalves[] = {DType::F16, DType::BF16};

AttributeMap conv(int64_t k, int64_t pad, int64_t stride, int64_t group, const std::string& act) {
  AttributeMap a{{"kernel_shape", attr_ints({k, k})},
                 {"pads", attr_ints({pad, pad, pad, pad})},
                 {"strides", attr_ints({stride, stride})},
                 {"group", attr_i(group)}};
  if (!act.empty()) a["activation"] = attr_s(act);
  return a;
}

AttributeMap pool(int64_t k, int64_t pad, int64_t stride) {
  return {{"kernel_shape", attr_ints({k, k})},
          {"pads", attr_ints({pad, pad, pad, pad})},
          {"strides", attr_ints({stride, stride})}};
}

// One NhwcFusedConv case: x [n,h,w,c] -> m channels, k x k, output spatial oh x ow.
struct ConvCase {
  Shape x;
  int64_t m, k, pad, stride, group, oh, ow;
  bool bias, z;
  std::string act, what;
};

}  // namespace

void add_nhwc_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  const ConvCase convs[] = {
      {{2, 9, 11, 5}, 7, 3, 1, 1, 1, 9, 11, true, true, "Relu", "odd C/M bias z relu"},
      {{2, 9, 11, 5}, 7, 3, 1, 1, 1, 9, 11, true, false, "Relu", "odd C/M bias relu"},
      {{2, 9, 11, 5}, 7, 3, 1, 1, 1, 9, 11, false, true, "Relu", "odd C/M no-bias z relu"},
      {{2, 9, 11, 5}, 7, 3, 1, 1, 1, 9, 11, true, true, "", "odd C/M bias z identity"},
      {{2, 9, 11, 5}, 7, 3, 1, 1, 1, 9, 11, false, false, "", "odd C/M no-bias identity"},
      {{2, 32, 32, 3}, 64, 7, 3, 2, 1, 16, 16, true, false, "Relu", "C=3 stem k7 s2 bias relu"},
      {{3, 13, 13, 3}, 5, 5, 2, 1, 1, 13, 13, false, true, "", "C=3 k5 no-bias z identity"},
      {{2, 32, 32, 4}, 64, 7, 3, 2, 1, 16, 16, true, false, "Relu", "C=4 stem (RGB padded by ToNhwc) k7 s2 bias relu"},
      {{2, 17, 17, 16}, 32, 3, 1, 2, 1, 9, 9, true, true, "Relu", "k3 s2 bias z relu"},
      {{4, 7, 7, 64}, 256, 1, 0, 1, 1, 7, 7, true, true, "Relu", "1x1 ->256 bias z relu"},
      // 1x1 convs that may run as one cuBLASLt GEMM (conv_gemm.h; GPUOPT_CONV_GEMM=force takes it).
      {{3, 5, 7, 16}, 24, 1, 0, 1, 1, 5, 7, false, true, "", "1x1 16->24 no-bias z identity"},
      {{2, 6, 6, 32}, 64, 1, 0, 1, 1, 6, 6, true, false, "", "1x1 32->64 bias identity"},
      {{2, 6, 6, 32}, 64, 1, 0, 1, 1, 6, 6, true, true, "", "1x1 32->64 bias z identity"},
      {{1, 9, 5, 40}, 16, 1, 0, 1, 1, 9, 5, true, false, "Relu", "1x1 40->16 bias relu"},
      {{2, 14, 14, 128}, 128, 3, 1, 1, 1, 14, 14, true, true, "Relu", "k3 128->128 bias z relu"},
      {{1, 10, 10, 8}, 12, 3, 1, 1, 4, 10, 10, true, true, "Relu", "group 4 bias z relu"},
      {{2, 14, 14, 32}, 32, 3, 1, 1, 32, 14, 14, true, false, "Relu", "depthwise 32 bias relu"},
      {{2, 15, 15, 24}, 24, 3, 1, 2, 24, 8, 8, true, false, "", "depthwise 24 s2 bias identity"},
      {{1, 9, 9, 40}, 40, 7, 3, 1, 40, 9, 9, true, true, "", "depthwise 40 k7 bias z identity"},
      // gpuopt's depthwise kernel: 2 and 1 channels per access, k5 s2, 1x1, a ConvNeXt block's 7x7
      // with output widths that leave a partial block; a channel multiplier of 2 stays on cuDNN.
      {{2, 10, 13, 6}, 6, 3, 1, 1, 6, 10, 13, true, true, "Relu", "depthwise 6 (2-wide) bias z relu"},
      {{2, 11, 9, 5}, 5, 5, 2, 2, 5, 6, 5, true, false, "Relu", "depthwise 5 (scalar) k5 s2 bias relu"},
      {{2, 12, 11, 16}, 16, 5, 2, 2, 16, 6, 6, false, true, "", "depthwise 16 k5 s2 z identity"},
      {{2, 7, 7, 32}, 32, 1, 0, 1, 32, 7, 7, true, false, "", "depthwise 32 k1 bias identity"},
      {{2, 14, 15, 96}, 96, 7, 3, 1, 96, 14, 15, true, false, "", "depthwise 96 k7 bias (ConvNeXt)"},
      {{2, 8, 8, 16}, 32, 3, 1, 1, 16, 8, 8, true, false, "Relu", "channel multiplier 2 (cuDNN) bias relu"},
      // HardSwish (MobileNetV3) and Swish (SiLU: EfficientNet) epilogues: the depthwise kernel,
      // 1-wide and 2-wide, the cuDNN conv + our epilogue pass (dense 3x3, 1x1 with z), k5 s2.
      {{2, 14, 14, 72}, 72, 3, 1, 1, 72, 14, 14, true, false, "HardSwish", "depthwise 72 bias hardswish"},
      {{2, 11, 9, 5}, 5, 5, 2, 2, 5, 6, 5, true, false, "HardSwish", "depthwise 5 (scalar) k5 s2 hardswish"},
      {{2, 14, 14, 96}, 96, 3, 1, 1, 96, 14, 14, true, false, "Swish", "depthwise 96 bias swish"},
      {{2, 10, 13, 6}, 6, 5, 2, 2, 6, 5, 7, true, true, "Swish", "depthwise 6 (2-wide) k5 s2 bias z swish"},
      {{2, 9, 11, 16}, 24, 3, 1, 1, 1, 9, 11, true, false, "HardSwish", "k3 16->24 bias hardswish"},
      {{4, 7, 7, 64}, 256, 1, 0, 1, 1, 7, 7, true, true, "Swish", "1x1 ->256 bias z swish"},
      {{2, 16, 16, 32}, 96, 1, 0, 1, 1, 16, 16, false, false, "Swish", "1x1 32->96 no-bias swish"},
  };
  for (DType dt : kHalves) {
    for (const ConvCase& c : convs) {
      const Shape y{c.x[0], c.oh, c.ow, c.m};
      std::vector<InputSpec> in{data(dt, c.x, -1, 1), data(dt, {c.m, c.k, c.k, c.x[3] / c.group}, -0.5, 0.5)};
      in.push_back(c.bias ? data(dt, {c.m}) : none);
      if (c.z) in.push_back(data(dt, y));
      while (in.size() > 2 && in.back().dtype == DType::Undefined) in.pop_back();
      cases.push_back({"NhwcFusedConv", label(dt, c.x, c.what), in, conv(c.k, c.pad, c.stride, c.group, c.act)});
    }
  }
  // Dilation 2 takes the depthwise kernel's plain loop.
  for (DType dt : kHalves) {
    AttributeMap dil = conv(3, 2, 1, 16, "Relu");
    dil["dilations"] = attr_ints({2, 2});
    cases.push_back({"NhwcFusedConv",
                     label(dt, {2, 9, 10, 16}, "depthwise 16 dilation 2 bias relu"),
                     {data(dt, {2, 9, 10, 16}, -1, 1), data(dt, {16, 3, 3, 1}, -0.5, 0.5), data(dt, {16})},
                     dil});
  }
  // f32 NhwcFusedConv is declined (the layout pass writes it only for fp16/bf16): CPU fallback.
  cases.push_back({"NhwcFusedConv",
                   label(DType::F32, {1, 8, 8, 3}, "k3 p1 (CPU fallback)"),
                   {data(DType::F32, {1, 8, 8, 3}), data(DType::F32, {4, 3, 3, 3}, -0.5, 0.5), data(DType::F32, {4})},
                   conv(3, 1, 1, 1, "Relu")});

  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    cases.push_back({"NhwcMaxPool", label(dt, {2, 16, 16, 8}, "k3 s2 p1"), {data(dt, {2, 16, 16, 8})}, pool(3, 1, 2)});
    cases.push_back(
        {"NhwcMaxPool", label(dt, {3, 11, 13, 5}, "odd k3 s2 p1"), {data(dt, {3, 11, 13, 5})}, pool(3, 1, 2)});
    // All negative: a padded tap counted as 0 would win at every border.
    cases.push_back({"NhwcMaxPool",
                     label(dt, {2, 9, 9, 16}, "negative k3 s1 p1"),
                     {data(dt, {2, 9, 9, 16}, -3, -1)},
                     pool(3, 1, 1)});
    cases.push_back({"NhwcMaxPool", label(dt, {1, 8, 8, 64}, "k2 s2"), {data(dt, {1, 8, 8, 64})}, pool(2, 0, 2)});
  }
  // gpuopt's kernel (maxpool_nhwc.h, the default) at its edges: each template column loop (k3 s2,
  // k2 s2, k3 s1 over 16-byte vectors) with output widths that leave a partial group of 4,
  // ceil_mode, one-sided pads, pads of 2 (a window with one tap inside), a 2x3 window; the general
  // loop over 8-, 4- and 2-byte vectors (C not a multiple of 8). All negative, so a padded tap
  // counted as 0 would win at the borders.
  struct PoolCase {
    Shape x;
    std::vector<int64_t> k, s, pads;
    int64_t ceil;
    const char* what;
  };
  const PoolCase pools[] = {
      {{2, 13, 15, 64}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, "k3 s2 p1 ow 8"},
      {{1, 11, 21, 16}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, "k3 s2 p1 ow 11 (partial group)"},
      {{2, 10, 10, 16}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, "k3 s2 ceil_mode"},
      {{2, 9, 10, 32}, {3, 3}, {2, 2}, {1, 0, 0, 1}, 0, "k3 s2 pads top/right"},
      {{1, 9, 9, 24}, {3, 3}, {2, 2}, {2, 2, 2, 2}, 0, "k3 s2 pads 2"},
      {{2, 7, 9, 16}, {2, 2}, {2, 2}, {0, 0, 0, 0}, 1, "k2 s2 ceil_mode odd"},
      {{1, 6, 13, 40}, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, "k3 s1 p1 ow 13"},
      {{2, 8, 11, 16}, {2, 3}, {1, 2}, {0, 1, 1, 1}, 0, "k2x3 s1x2"},
      {{2, 9, 11, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, "C=12 (8-byte vectors)"},
      {{2, 9, 11, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, "C=6 (4-byte vectors)"},
      {{2, 9, 11, 3}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 1, "C=3 ceil_mode (2-byte)"},
      {{1, 12, 12, 16}, {5, 5}, {3, 3}, {2, 2, 2, 2}, 0, "k5 s3 p2 (general loop)"},
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const PoolCase& pc : pools) {
      AttributeMap a{{"kernel_shape", attr_ints(pc.k)}, {"strides", attr_ints(pc.s)}, {"pads", attr_ints(pc.pads)}};
      if (pc.ceil) a["ceil_mode"] = attr_i(1);
      cases.push_back({"NhwcMaxPool", label(dt, pc.x, pc.what), {data(dt, pc.x, -3, -1)}, a});
    }
  // ResNet-50's stem pool at batch 64 (103 MB in, larger than the L2): `backend_ops perf --case perf`.
  cases.push_back({"NhwcMaxPool",
                   label(DType::F16, {64, 112, 112, 64}, "k3 s2 p1 (ResNet stem) perf"),
                   {data(DType::F16, {64, 112, 112, 64})},
                   pool(3, 1, 2)});
  // ToNhwc (the nhwc_entry pass): the input's Cast and entry Transpose in one pass, an RGB input
  // padded to 4 channels (the 8-byte store path) or other widths (the general path); exact.
  struct EntryCase {
    DType in;
    int64_t to;  // ONNX data type of Y (0: absent, X's)
    Shape x;
    int64_t channels;  // 0: absent
    const char* what;
  };
  const EntryCase entries[] = {
      {DType::F32, 10, {2, 3, 17, 19}, 4, "f32->f16 C3->4 (RGB stem)"},
      {DType::F32, 10, {1, 3, 224, 224}, 4, "f32->f16 C3->4 224x224"},
      {DType::F32, 16, {3, 1, 7, 5}, 4, "f32->bf16 C1->4"},
      {DType::F16, 0, {2, 3, 9, 11}, 0, "f16 C3 (transpose only)"},
      {DType::F32, 10, {2, 5, 6, 7}, 8, "f32->f16 C5->8"},
      {DType::F32, 1, {2, 3, 5, 5}, 6, "f32 C3->6"},
      {DType::BF16, 1, {2, 2, 4, 9}, 0, "bf16->f32 C2"},
  };
  for (const EntryCase& e : entries) {
    AttributeMap a;
    if (e.to) a["to"] = attr_i(e.to);
    if (e.channels) a["channels"] = attr_i(e.channels);
    cases.push_back({"ToNhwc", label(e.in, e.x, e.what), {data(e.in, e.x)}, a});
  }
  // With the input's quantize round trip (a QDQ model's quantized input): int8 and uint8 zero
  // points, values past the int8 range (saturation), the 8-byte store path and the general one.
  cases.push_back({"ToNhwc", label(DType::F32, {2, 3, 17, 19}, "f32->f16 C3->4 QDQ i8 zp 3"),
                   {data(DType::F32, {2, 3, 17, 19}, -3, 3), scalar(DType::F16, 0.02), const_tensor(DType::I8, {}, {3})},
                   {{"to", attr_i(10)}, {"channels", attr_i(4)}}});
  cases.push_back({"ToNhwc", label(DType::F32, {2, 3, 5, 7}, "f32 C3->6 QDQ u8 zp 128"),
                   {data(DType::F32, {2, 3, 5, 7}, -2, 2), scalar(DType::F32, 0.0125), const_tensor(DType::U8, {}, {128})},
                   {{"channels", attr_i(6)}}});
  cases.push_back({"ToNhwc", label(DType::F32, {1, 3, 6, 6}, "f32->bf16 QDQ no zero point"),
                   {data(DType::F32, {1, 3, 6, 6}, -1, 2), scalar(DType::BF16, 0.01)},
                   {{"to", attr_i(16)}, {"channels", attr_i(4)}}});
  // cuDNN cannot: our channels-last kernel runs these under either GPUOPT_POOL_KERNEL.
  for (DType dt : kHalves) {
    AttributeMap ceil = pool(3, 1, 2);
    ceil["ceil_mode"] = attr_i(1);
    cases.push_back(
        {"NhwcMaxPool", label(dt, {1, 10, 10, 8}, "ceil_mode (own kernel)"), {data(dt, {1, 10, 10, 8})}, ceil});
    AttributeMap dil = pool(3, 2, 1);
    dil["dilations"] = attr_ints({2, 2});
    cases.push_back(
        {"NhwcMaxPool", label(dt, {2, 9, 11, 6}, "dilation 2 (own kernel)"), {data(dt, {2, 9, 11, 6}, -3, -1)}, dil});
    AttributeMap asym = pool(2, 0, 2);
    asym["pads"] = attr_ints({0, 1, 1, 0});
    cases.push_back({"NhwcMaxPool",
                     label(dt, {2, 7, 7, 3}, "asymmetric pads (own kernel)"),
                     {data(dt, {2, 7, 7, 3}, -3, -1)},
                     asym});
  }
}

}  // namespace gpuopt::backend_ops
