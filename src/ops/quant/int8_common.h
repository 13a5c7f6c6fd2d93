// What the int8 ops of fold_qdq (Int8Gemm, Int8Conv, Int8Add) share in their schema checks.
#pragma once

#include "ir/op_table.h"

#include <string>

namespace gpuopt::quant {

// The `activation` attribute: absent/empty (identity) or "Relu".
template <class Ctx>
Status check_relu_activation(const Ctx& ctx) {
  const std::string a = ctx.node.attr_s("activation", "");
  if (!a.empty() && a != "Relu") return ctx.error("activation '{}' is not one of '', 'Relu'", a);
  return Status::Ok();
}

}  // namespace gpuopt::quant
