// One backend-ops case: an op (by ONNX name), its attributes, and input specs. Shapes mix powers
// of two with odd sizes; values are fresh random numbers (never zeros).
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "ir/attribute.h"
#include "op_test.h"

#include <string>
#include <vector>

namespace gpuopt::backend_ops {

struct InputSpec {
  DType dtype = DType::F32;  // DType::Undefined = absent optional input
  Shape shape;
  bool host_constant = false;  // given as a constant (e.g. Reshape's shape): `values` holds it
  std::vector<double> values;
  double lo = -2.0, hi = 2.0;  // random range for data inputs
  double zero_fraction = 0.0;  // data inputs: this share of the elements is exactly zero
};

struct Case {
  std::string op;
  std::string label;  // shown in the report, e.g. "f16 [5,7,11,13]"
  std::vector<InputSpec> inputs;
  AttributeMap attrs;
  int opset = 17;
  int num_outputs = 1;
  // Integer outputs are exact unless a case allows this many steps (a float epilogue rounded to
  // int8, as Int8Conv's requantize: the GPU's f32 arithmetic against the reference's double).
  double int_steps = 0;
  // U8 outputs that are e4m3 codes (Fp8Gemm's y_scale form): compared as the values they encode,
  // within one e4m3 step of the reference's value or 2^-6 (the smallest normal, eight subnormal
  // steps): near zero the fp8 tensor cores' f32 accumulation, not exact like the reference's,
  // moves a Relu'd value across a few subnormal codes.
  bool e4m3_codes = false;
};

// Every case, for every dtype the op should support on CUDA.
std::vector<Case> all_cases();

// Builders shared by the case files (cases.cpp, cases_more.cpp).
using op_test::attr_f;  // attribute builders: tests/op_test.h
using op_test::attr_i;
using op_test::attr_ints;
using op_test::attr_s;
using op_test::attr_t;
InputSpec data(DType dt, Shape s, double lo = -2, double hi = 2);  // fresh random values in [lo, hi)
InputSpec constant_i64(std::vector<double> v);
InputSpec scalar(DType dt, double v);
InputSpec const_tensor(DType dt, Shape s, std::vector<double> v);  // fixed values, still uploaded
std::string label(DType dt, const Shape& s, const std::string& extra = "");  // "f16 [5,7,11,13] extra"

// cases_more.cpp: variadic Sum/Mean/Min/Max, Resize cubic and antialias, NonZero.
void add_variadic_cases(std::vector<Case>& cases);
void add_resize_more_cases(std::vector<Case>& cases);
void add_norm_width_cases(std::vector<Case>& cases);  // cases_more.cpp (and SkipLayerNormalization)
void add_fused_gemm_cases(std::vector<Case>& cases);  // cases_more.cpp: FusedGemm's activations
void add_arg_cases(std::vector<Case>& cases);         // cases_more.cpp: ArgMax/ArgMin
void add_nonzero_cases(std::vector<Case>& cases);
// cases_elementwise.cpp: each fast path of the elementwise/Transpose kernels, and the "perf"
// cases (BERT-base sizes) for `backend_ops perf --case perf`.
void add_elementwise_cases(std::vector<Case>& cases);
// cases_fusedconv.cpp: FusedConv (conv + bias + residual + Relu/identity in one cuDNN call).
void add_fusedconv_cases(std::vector<Case>& cases);
// cases_versions.cpp: the older forms of ops registered by opset range (Softmax-11, Slice-9, ...).
void add_version_cases(std::vector<Case>& cases);
// cases_attention.cpp: Attention (4-D, masks, causal, grouped KV heads) and BERT-size perf cases.
void add_attention_cases(std::vector<Case>& cases);
// cases_rotary.cpp: RotaryEmbedding (3-D/4-D, interleaved, partial rotation, position_ids or not).
void add_rotary_cases(std::vector<Case>& cases);
// cases_conv_nd.cpp: 1-D and 3-D Conv, FusedConv and ConvTranspose (cuDNN, unit height / N-d).
void add_conv_nd_cases(std::vector<Case>& cases);
// cases_nhwc.cpp: the layout_nhwc pass's channels-last NhwcFusedConv and NhwcMaxPool.
void add_nhwc_cases(std::vector<Case>& cases);
// cases_depthwise.cpp: the depthwise kernel's wide tile at stride 2, and NhwcFusedConv's spatial
// mean output (se_mean pass) through every tile and through cuDNN's conv.
void add_depthwise_cases(std::vector<Case>& cases);
// cases_int8.cpp: Int8Gemm (fold_qdq's int8 GEMM with its dequantize epilogue) and Int8Conv
// (its channels-last int8 convolution, float or requantized int8 output).
void add_int8_cases(std::vector<Case>& cases);
// cases_fused_quant.cpp: Int8Gemm's full epilogue (Gelu, residual, int8 output) at edge shapes, and
// SkipLayerNormalization's e4m3 output (--precision fp8).
void add_fused_quant_cases(std::vector<Case>& cases);

}  // namespace gpuopt::backend_ops
