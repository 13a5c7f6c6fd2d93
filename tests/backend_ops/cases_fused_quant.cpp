// SkipLayerNormalization's e4m3 output (gpuopt's output 4, attribute fp8_scale, written by the fp8
// rewrite for the Fp8Gemms reading the normalised rows): the codes of the stored output /
// fp8_scale through each LayerNorm kernel (16-byte: widths a multiple of 8 for 16-bit types and 4
// for f32; warp: other widths up to 2048; block: wider rows), compared as e4m3 values (one step:
// the GPU's f32 statistics and the reference's double ones may round the output differently), and
// its int8 form (attribute int8_scale, QuantizeLinear of the stored output: one step, likewise).
//
// Int8Gemm's whole epilogue (fuse_int8_epilogue's parts): per-column scale and bias, each
// activation (Relu, Gelu erf and tanh), a residual of the output's shape, and an int8 output
// (v / y_scale rounded half to even, saturated) or a float one, at edge shapes: M = 1, 7, 129
// (rows the epilogue's 8-row blocks do not divide), N = 64 (eight columns per thread), 36 and 20
// (four), 7 (one column per thread, and the simple GEMM kernel: N not a multiple of 4). The sums
// are exact on both sides; int8 outputs may differ by one step where the GPU's f32 epilogue and
// the reference's double one fall on either side of a half (int_steps 1).
#include "cases.h"

#include <cmath>

namespace gpuopt::backend_ops {

namespace {

void add_skip_layernorm_quant_cases(std::vector<Case>& cases) {
  struct Sz {
    DType dt;
    Shape s;
    const char* what;
  };
  const Sz sizes[] = {{DType::F16, {3, 7, 64}, "16-byte"},  {DType::BF16, {2, 5, 768}, "16-byte"},
                      {DType::F32, {3, 7, 64}, "16-byte"},  {DType::F16, {2, 5, 36}, "warp"},
                      {DType::F32, {4, 3, 30}, "warp"},     {DType::F16, {2, 3000}, "block"}};
  for (const Sz& z : sizes) {
    const int64_t h = z.s.back();
    Case c{"SkipLayerNormalization", label(z.dt, z.s, std::string(z.what) + ", e4m3 out"),
           {data(z.dt, z.s), data(z.dt, z.s), data(z.dt, {h}, -2, 2), data(z.dt, {h}, -0.5, 0.5)},
           {{"epsilon", attr_f(1e-12f)}, {"fp8_scale", attr_f(4.0f / 448)}}};  // |y| past 4 saturates
    c.num_outputs = 5;
    c.e4m3_codes = true;
    cases.push_back(c);
    // The int8 form (--precision int8): QuantizeLinear of the stored output by int8_scale.
    Case q{"SkipLayerNormalization", label(z.dt, z.s, std::string(z.what) + ", int8 out"), c.inputs,
           {{"epsilon", attr_f(1e-12f)}, {"int8_scale", attr_f(4.0f / 127)}}};
    q.num_outputs = 5;
    q.int_steps = 1;
    cases.push_back(std::move(q));
  }
}

void add_int8_gemm_epilogue_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  struct Act {
    const char* name;
    const char* approx;
  };
  const Act acts[] = {{"", ""}, {"Relu", ""}, {"Gelu", "none"}, {"Gelu", "tanh"}};
  const int64_t k = 96;
  // Scales as calibration gives them: v = sum * sa * sb of about unit spread; y_scale puts that
  // at ~20 steps, so the largest values saturate at +-127.
  const double sa = 0.02, sb = 1.0 / (127.0 * std::sqrt(static_cast<double>(k)) * sa), sy = 0.05;
  struct Sz {
    int64_t m, n;
  };
  const Sz sizes[] = {{129, 64}, {7, 64}, {1, 36}, {129, 20}, {7, 7}, {1, 7}};
  for (DType dt : {DType::F16, DType::F32})
    for (const Sz& s : sizes)
      for (const Act& act : acts)
        for (bool int8_out : {true, false}) {
          AttributeMap at;
          std::string what = act.name[0] ? std::string(act.name) + (std::string(act.approx) == "tanh" ? " tanh" : "") : "no act";
          if (act.name[0]) at["activation"] = attr_s(act.name);
          if (act.approx[0]) at["approximate"] = attr_s(act.approx);
          // Half the cases without the bias or the residual, alternating, so each optional input
          // is also absent somewhere.
          const bool residual = int8_out ? s.m != 7 : s.m != 1;
          const bool bias = !int8_out || s.n != 7;
          Case c{"Int8Gemm",
                 label(dt, {s.m, k, s.n},
                       what + (bias ? " bias" : "") + (residual ? " residual" : "") + (int8_out ? ", int8 out" : ", float out")),
                 {data(DType::I8, {s.m, k}, -127, 128), data(DType::I8, {s.n, k}, -127, 128), scalar(dt, sa),
                  data(dt, {s.n}, sb * 0.5, sb * 1.5), bias ? data(dt, {s.n}, -0.5, 0.5) : none,
                  residual ? data(dt, {s.m, s.n}, -1, 1) : none},
                 at};
          if (int8_out) {
            c.inputs.push_back(scalar(dt, sy));
            c.int_steps = 1;
          } else if (!residual) {
            c.inputs.pop_back();
          }
          cases.push_back(c);
        }
}

}  // namespace

void add_fused_quant_cases(std::vector<Case>& cases) {
  add_int8_gemm_epilogue_cases(cases);
  add_skip_layernorm_quant_cases(cases);
}

}  // namespace gpuopt::backend_ops
