// Int8Gemm's optional parts, read and checked once (its schema, CPU kernel and CUDA op read them
// through here; the op is described in int8_gemm.cpp): the activation (gemm_activation.h) and
// which of the optional inputs bias (4), residual (5) and y_scale (6, int8 output) are given.
#pragma once

#include "ops/quant/gemm_activation.h"

namespace gpuopt::quant {

struct Int8GemmAttrs {
  GemmAct act = GemmAct::kNone;
  bool bias = false, residual = false, int8_out = false;

  template <class Ctx>
  static Result<Int8GemmAttrs> read(const Ctx& ctx) {
    Int8GemmAttrs a;
    GPUOPT_ASSIGN_OR_RETURN(a.act, read_gemm_activation(ctx));
    a.bias = ctx.has_input(4);
    a.residual = ctx.has_input(5);
    a.int8_out = ctx.has_input(6);
    return a;
  }
};

}  // namespace gpuopt::quant
