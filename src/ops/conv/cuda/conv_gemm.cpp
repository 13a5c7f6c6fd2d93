// run_conv_gemm (conv_gemm.h): the 1x1 channels-last convolution as one cuBLASLt GEMM.
#include "ops/conv/cuda/conv_gemm.h"

#include "core/env.h"
#include "ops/matmul/cuda/matmul_lt.h"

namespace gpuopt::cuda {

namespace {
bool conv_gemm_on() {
  static const bool on = env_get("GPUOPT_CONV_GEMM").value_or("1") != "0";
  return on;
}
}  // namespace

bool conv_gemm_applies(const ConvKey& key, ConvAct act, bool has_z) {
  return conv_gemm_on() && key.nhwc && act == ConvAct::kNone && !has_z && key.group == 1 && key.kh == 1 &&
         key.kw == 1 && key.sh == 1 && key.sw == 1 && key.ph == 0 && key.pw == 0 && key.oh == key.h &&
         key.ow == key.w && (key.dt == DType::F16 || key.dt == DType::BF16);
}

Status run_conv_gemm(CudaKernelContext& k, const ConvKey& key, const void* x, const void* w, const void* b, void* y) {
  MatmulShape s;
  s.m = key.n * key.h * key.w;  // one row per pixel
  s.n = key.m;
  s.k = key.c;
  s.trans_b = true;  // w is [m, c]: B stored [n, k]
  return matmul(k.ctx, s, key.dt, x, w, y, 1.f, 0.f, b, b ? Epilogue::kBias : Epilogue::kNone)
      .with_context(node_label(k.node));
}

}  // namespace gpuopt::cuda
