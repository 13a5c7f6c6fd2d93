// gpuopt's depthwise channels-last kernel (ops/conv/cuda/depthwise*.cu) beyond cases_nhwc.cpp:
// the wide tile at stride 2 (4 channels x 4 output columns) at the shapes the exporters give
// (k3/k5/k7, pads 1/2/3) and at the edges (odd H/W, output widths that leave a partial column
// block, C not a multiple of 8 or 4, batch 1 and odd, every activation, bias and z or not); and
// NhwcFusedConv's second output, the spatial mean per (image, channel) that the se_mean pass
// asks for, through every tile (row tiles at strides 1 and 2, the pixel loop for 1- and 2-wide
// channels and dilation), with many channel slabs (C = 1152) and many row slices (batch 1,
// 64 rows), and through cuDNN's conv plus the mean kernel (a dense conv). The reference is the
// NCHW FusedConv between transposes, then the mean of Y as stored. Also the prologue
// (input_activation: the reference applies it to X first), the 1x1 convs that run as a GEMM, and
// the edges of the shared-memory kernel (GPUOPT_DEPTHWISE_KERNEL=smem, labels "dwsmem").
#include "cases.h"
#include "ops/conv/conv_activation.h"

namespace gpuopt::backend_ops {
namespace {

struct DwCase {
  Shape x;  // [n, h, w, c]
  int64_t m, k, pad, stride, group;
  bool bias, z;
  std::string act, what;
};

int64_t out_dim(int64_t in, int64_t k, int64_t pad, int64_t stride) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

void add_depthwise_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  auto make = [&](DType dt, const DwCase& c, int outputs, const AttributeMap& extra) {
    const int64_t dil = extra.count("dilations") ? extra.at("dilations").ints[0] : 1;
    const int64_t ke = (c.k - 1) * dil + 1;
    const Shape y{c.x[0], out_dim(c.x[1], ke, c.pad, c.stride), out_dim(c.x[2], ke, c.pad, c.stride), c.m};
    const float xr = extra.count(std::string(kConvInputActivation)) ? 2.5f : 1.f;  // the activations' curves
    std::vector<InputSpec> in{data(dt, c.x, -xr, xr), data(dt, {c.m, c.k, c.k, c.x[3] / c.group}, -0.5, 0.5)};
    in.push_back(c.bias ? data(dt, {c.m}) : none);
    if (c.z) in.push_back(data(dt, y));
    while (in.size() > 2 && in.back().dtype == DType::Undefined) in.pop_back();
    AttributeMap a{{"kernel_shape", attr_ints({c.k, c.k})},
                   {"pads", attr_ints({c.pad, c.pad, c.pad, c.pad})},
                   {"strides", attr_ints({c.stride, c.stride})},
                   {"group", attr_i(c.group)}};
    if (!c.act.empty()) a["activation"] = attr_s(c.act);
    for (const auto& [k, v] : extra) a[k] = v;
    Case out{"NhwcFusedConv", label(dt, c.x, c.what), in, a};
    out.num_outputs = outputs;
    cases.push_back(out);
  };
  const DwCase stride2[] = {
      {{1, 15, 17, 12}, 12, 3, 1, 2, 12, true, false, "Swish", "dw s2 C=12 (wide, 4-wide) k3 bias swish"},
      {{3, 13, 11, 20}, 20, 5, 2, 2, 20, true, true, "HardSwish", "dw s2 C=20 k5 bias z hardswish"},
      {{1, 9, 7, 6}, 6, 3, 1, 2, 6, true, false, "Relu", "dw s2 C=6 (2-wide) k3 bias relu"},
      {{3, 14, 14, 24}, 24, 5, 2, 2, 24, false, false, "", "dw s2 C=24 k5 no-bias identity"},
      {{2, 7, 9, 32}, 32, 3, 1, 2, 32, false, true, "Swish", "dw s2 C=32 k3 z swish"},
      {{1, 5, 5, 5}, 5, 3, 1, 2, 5, true, false, "HardSwish", "dw s2 C=5 (scalar) k3 hardswish"},
      {{2, 11, 13, 40}, 40, 7, 3, 2, 40, true, false, "Relu", "dw s2 C=40 k7 bias relu"},
      {{2, 10, 10, 16}, 16, 3, 0, 2, 16, true, false, "", "dw s2 C=16 k3 pad 0"},
      {{5, 29, 29, 144}, 144, 5, 2, 2, 144, true, false, "Swish", "dw s2 C=144 k5 (EfficientNet) swish"},
  };
  const DwCase mean[] = {
      {{2, 14, 14, 32}, 32, 3, 1, 1, 32, true, false, "Swish", "dw+mean C=32 k3 s1 swish"},
      {{1, 9, 11, 12}, 12, 3, 1, 1, 12, true, false, "Swish", "dw+mean C=12 (4-wide) odd HW"},
      {{3, 7, 7, 20}, 20, 5, 2, 1, 20, true, true, "HardSwish", "dw+mean C=20 k5 bias z hardswish"},
      {{2, 10, 9, 6}, 6, 3, 1, 1, 6, true, false, "Relu", "dw+mean C=6 (2-wide) relu"},
      {{1, 5, 6, 5}, 5, 3, 1, 1, 5, false, false, "", "dw+mean C=5 (scalar) identity"},
      {{2, 17, 15, 40}, 40, 5, 2, 2, 40, true, false, "Swish", "dw+mean C=40 k5 s2 swish"},
      {{2, 15, 15, 24}, 24, 3, 1, 2, 24, true, false, "HardSwish", "dw+mean C=24 k3 s2 hardswish"},
      {{2, 7, 7, 1152}, 1152, 5, 2, 1, 1152, true, false, "Swish", "dw+mean C=1152 k5 (9 channel slabs)"},
      {{1, 64, 8, 16}, 16, 3, 1, 1, 16, true, false, "Swish", "dw+mean batch 1, 64 row slices"},
      {{33, 16, 16, 8}, 8, 3, 1, 1, 8, true, false, "Swish", "dw+mean batch 33 C=8"},
      {{2, 14, 15, 96}, 96, 7, 3, 1, 96, true, false, "", "dw+mean C=96 k7"},
      {{2, 9, 11, 16}, 24, 3, 1, 1, 1, true, false, "Relu", "dense conv + mean (cuDNN, then the mean kernel)"},
  };
  // `backend_ops perf --case se-perf`: EfficientNet-B0's SE convs at batch 32
  // with and without the mean, the ReduceMean they replace, and stride-2 convs for the tile A/B.
  const DwCase perf[] = {
      {{32, 112, 112, 32}, 32, 3, 1, 1, 32, true, false, "Swish", "se-perf b1 k3"},
      {{32, 56, 56, 144}, 144, 3, 1, 1, 144, true, false, "Swish", "se-perf b2 k3"},
      {{32, 14, 14, 672}, 672, 5, 2, 1, 672, true, false, "Swish", "se-perf b5 k5"},
  };
  for (const DwCase& c : perf) {
    make(DType::F16, c, 1, {});
    DwCase m = c;
    m.what += " +mean";
    make(DType::F16, m, 2, {});
    const Shape y{c.x[0], c.x[1], c.x[2], c.m};
    cases.push_back({"ReduceMean", label(DType::F16, y, c.what + " ReduceMean"), {data(DType::F16, y)},
                     {{"axes", attr_ints({1, 2})}, {"keepdims", attr_i(1)}}});
  }
  make(DType::F16, {{32, 112, 112, 96}, 96, 3, 1, 2, 96, true, false, "Swish", "se-perf s2 k3"}, 1, {});
  make(DType::F16, {{32, 56, 56, 144}, 144, 5, 2, 2, 144, true, false, "Swish", "se-perf s2 k5"}, 1, {});
  // The prologue (NhwcFusedConv's input_activation, fuse_dw_prologue): act(x) on each in-bounds
  // input value, padding 0, through every tile (row tiles k3/k5/k7 at strides 1 and 2 with 8-,
  // 4- and 2-wide channel groups, the scalar and pixel loops), with and without the mean output,
  // with the epilogue's bias, z and activation beside it.
  const DwCase prologue[] = {
      {{2, 14, 14, 32}, 32, 3, 1, 1, 32, true, false, "", "prologue k3 s1 C=32"},
      {{1, 9, 11, 12}, 12, 3, 1, 1, 12, true, false, "Relu", "prologue k3 s1 C=12 (4-wide) odd HW relu"},
      {{3, 13, 11, 20}, 20, 5, 2, 2, 20, true, true, "", "prologue k5 s2 C=20 bias z"},
      {{2, 11, 13, 40}, 40, 7, 3, 1, 40, false, false, "", "prologue k7 s1 C=40 no bias"},
      {{2, 11, 13, 40}, 40, 7, 3, 2, 40, true, false, "Swish", "prologue k7 s2 C=40 swish"},
      {{1, 9, 7, 6}, 6, 3, 1, 2, 6, true, false, "", "prologue k3 s2 C=6 (2-wide)"},
      {{1, 5, 6, 5}, 5, 3, 1, 1, 5, true, false, "", "prologue C=5 (scalar)"},
      {{2, 10, 10, 16}, 16, 3, 0, 2, 16, true, false, "", "prologue k3 s2 pad 0"},
      {{2, 15, 17, 144}, 144, 5, 2, 1, 144, true, false, "", "prologue k5 s1 C=144 (EfficientNet)"},
  };
  for (DType dt : {DType::F16, DType::BF16}) {
    for (const char* in_act : {"Swish", "HardSwish", "Relu"}) {
      const AttributeMap pa{{std::string(kConvInputActivation), attr_s(in_act)}};
      for (const DwCase& c : prologue) {
        DwCase p = c;
        p.what += std::string(" in=") + in_act;
        make(dt, p, 1, pa);
        p.what += " +mean";
        make(dt, p, 2, pa);
      }
      AttributeMap dil = pa;
      dil["dilations"] = attr_ints({2, 2});
      make(dt, {{2, 9, 10, 16}, 16, 3, 2, 1, 16, true, false, "", std::string("prologue dilation 2 (pixel loop) in=") + in_act},
           2, dil);
    }
    // Not a depthwise conv (cuDNN's): the activated copy of x, then the plain path.
    make(dt, {{2, 9, 11, 16}, 24, 3, 1, 1, 1, true, false, "Relu", "prologue on a dense conv (activated copy)"}, 1,
         {{std::string(kConvInputActivation), attr_s("Swish")}});
  }
  // 1x1 convs without activation or z (cuBLASLt with the bias epilogue, conv_gemm.h), and beside
  // them the shapes that stay on cuDNN (z, stride 2, padding).
  for (DType dt : {DType::F16, DType::BF16}) {
    make(dt, {{2, 7, 9, 24}, 40, 1, 0, 1, 1, true, false, "", "1x1 gemm bias"}, 1, {});
    make(dt, {{3, 5, 5, 16}, 8, 1, 0, 1, 1, false, false, "", "1x1 gemm no bias"}, 1, {});
    make(dt, {{2, 7, 9, 24}, 40, 1, 0, 1, 1, true, false, "", "1x1 gemm bias +mean"}, 2, {});
    make(dt, {{2, 6, 6, 24}, 32, 1, 0, 1, 1, true, false, "", "1x1 gemm bias, input prologue swish"}, 1,
         {{std::string(kConvInputActivation), attr_s("Swish")}});
    make(dt, {{2, 7, 9, 24}, 40, 1, 0, 1, 1, true, true, "", "1x1 bias z (cuDNN)"}, 1, {});
    make(dt, {{2, 8, 8, 24}, 40, 1, 0, 2, 1, true, false, "", "1x1 s2 bias (cuDNN)"}, 1, {});
  }
  // The shared-memory kernel's edges (depthwise_smem.cu; run them with
  // GPUOPT_DEPTHWISE_KERNEL=smem, labels "dwsmem"): output extents that leave partial tiles and
  // partial 4-column positions, odd H/W, pads 0-3 (wider than the kernel's half: output larger
  // than the input), stride 2 with odd input, k3/k5/k7, slabs of 8 to 1152 channels (one slab,
  // several, C = 8 and 24 where a slab is one or three 16-byte chunks), images large enough for
  // many tiles, with and without the mean, each prologue activation in turn, bias and z or not.
  const DwCase smem[] = {
      {{3, 13, 17, 8}, 8, 3, 1, 1, 8, true, false, "Swish", "dwsmem C=8 k3 s1 odd HW"},
      {{2, 9, 9, 8}, 8, 3, 0, 2, 8, true, false, "", "dwsmem C=8 k3 s2 pad 0 odd"},
      {{2, 15, 13, 24}, 24, 5, 2, 2, 24, true, true, "HardSwish", "dwsmem C=24 k5 s2 odd input bias z"},
      {{1, 9, 10, 16}, 16, 3, 2, 1, 16, true, false, "Relu", "dwsmem C=16 k3 pad 2 (output > input)"},
      {{2, 30, 33, 32}, 32, 3, 0, 1, 32, false, false, "Swish", "dwsmem C=32 k3 pad 0 no bias"},
      {{1, 112, 112, 32}, 32, 3, 1, 1, 32, true, false, "Swish", "dwsmem C=32 k3 112x112 (many tiles)"},
      {{1, 57, 55, 96}, 96, 3, 1, 2, 96, true, false, "Swish", "dwsmem C=96 k3 s2 odd 57x55"},
      {{2, 23, 29, 144}, 144, 3, 1, 1, 144, true, false, "Swish", "dwsmem C=144 k3 s1 23x29"},
      {{2, 29, 27, 144}, 144, 5, 2, 2, 144, true, false, "Swish", "dwsmem C=144 k5 s2 odd"},
      {{2, 14, 14, 240}, 240, 5, 2, 1, 240, true, true, "Swish", "dwsmem C=240 k5 s1 bias z"},
      {{1, 15, 15, 240}, 240, 3, 1, 2, 240, true, false, "", "dwsmem C=240 k3 s2 odd"},
      {{2, 11, 12, 48}, 48, 5, 3, 2, 48, true, false, "HardSwish", "dwsmem C=48 k5 s2 pad 3"},
      {{2, 19, 21, 40}, 40, 7, 3, 1, 40, true, false, "", "dwsmem C=40 k7 s1 pad 3"},
      {{2, 17, 15, 16}, 16, 7, 3, 2, 16, true, true, "Relu", "dwsmem C=16 k7 s2 pad 3 bias z"},
      {{2, 14, 14, 672}, 672, 5, 2, 1, 672, true, false, "Swish", "dwsmem C=672 k5 s1"},
      {{2, 7, 7, 1152}, 1152, 5, 2, 1, 1152, true, false, "Swish", "dwsmem C=1152 k5 7x7"},
      {{3, 7, 7, 1152}, 1152, 3, 1, 1, 1152, true, false, "Swish", "dwsmem C=1152 k3 7x7"},
      {{1, 60, 70, 16}, 16, 3, 1, 1, 16, true, false, "HardSwish", "dwsmem C=16 k3 60x70"},
  };
  const char* const prologues[] = {"Swish", "HardSwish", "Relu", ""};
  for (DType dt : {DType::F16, DType::BF16}) {
    int i = dt == DType::F16 ? 0 : 2;  // bf16 starts two activations further on
    for (const DwCase& c : smem) {
      const std::string in_act = prologues[i++ % 4];
      AttributeMap pa;
      if (!in_act.empty()) pa[std::string(kConvInputActivation)] = attr_s(in_act);
      DwCase p = c;
      p.what += " in=" + (in_act.empty() ? std::string("none") : in_act);
      make(dt, p, 1, pa);
      p.what += " +mean";
      make(dt, p, 2, pa);
    }
  }
  for (DType dt : {DType::F16, DType::BF16}) {
    for (const DwCase& c : stride2) make(dt, c, 1, {});
    for (const DwCase& c : mean) make(dt, c, 2, {});
    make(dt, {{2, 9, 10, 16}, 16, 3, 2, 1, 16, true, false, "Relu", "dw+mean dilation 2 (pixel loop)"}, 2,
         {{"dilations", attr_ints({2, 2})}});
  }
}

}  // namespace gpuopt::backend_ops
