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
}

}  // namespace gpuopt::backend_ops
