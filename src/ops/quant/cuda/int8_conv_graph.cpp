// make_int8_conv_graph (int8_conv_graph.h).
#include "ops/quant/cuda/int8_conv_graph.h"

#include <vector>

namespace gpuopt::cuda {
namespace {

namespace fe = cudnn_frontend;
using TA = fe::graph::Tensor_attributes;

fe::DataType_t fe_type(DType dt) {
  return dt == DType::I8 ? fe::DataType_t::INT8 : dt == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::FLOAT;
}

// NCHW dims with channels-last strides, as cuDNN names an NHWC tensor.
std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) {
  return {h * w * c, 1, w * c, c};
}

fe::graph::Pointwise_attributes pw(fe::PointwiseMode_t mode) {
  return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
}

}  // namespace

std::shared_ptr<fe::graph::Graph> make_int8_conv_graph(const Int8ConvGraphSpec& s) {
  const ConvKey& k = s.key;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::INT8)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g->tensor(TA().set_name("X").set_uid(kI8X).set_dim({k.n, k.c, k.h, k.w})
                         .set_stride(nhwc_strides(k.c, k.h, k.w)).set_data_type(fe::DataType_t::INT8));
  auto w = g->tensor(TA().set_name("W").set_uid(kI8W).set_dim({k.m, k.c, k.kh, k.kw})
                         .set_stride(nhwc_strides(k.c, k.kh, k.kw)).set_data_type(fe::DataType_t::INT8));
  auto opts = fe::graph::Conv_fprop_attributes()
                  .set_name("conv")
                  .set_padding({k.ph, k.pw})
                  .set_stride({k.sh, k.sw})
                  .set_dilation({k.dh, k.dw})
                  .set_compute_data_type(fe::DataType_t::INT32);
  auto y = g->conv_fprop(x, w, opts);
  y->set_data_type(s.fused ? s.conv_out : fe::DataType_t::INT32);
  if (s.fused) {
    auto channel = [&](const char* name, int64_t uid) {
      return g->tensor(TA().set_name(name).set_uid(uid).set_dim({1, k.m, 1, 1}).set_stride({k.m, 1, k.m, k.m})
                           .set_data_type(fe::DataType_t::FLOAT));
    };
    auto scalar_in = [&](const char* name, int64_t uid) {
      return g->tensor(TA().set_name(name).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1})
                           .set_data_type(fe::DataType_t::FLOAT));
    };
    auto constant = [&](float v) { return g->tensor(v, fe::graph::ScalarType::RUNTIME_PARAM); };
    auto op = [&](std::shared_ptr<TA> a, std::shared_ptr<TA> b, fe::PointwiseMode_t mode) {
      auto r = g->pointwise(a, b, pw(mode));
      r->set_data_type(fe::DataType_t::FLOAT);
      return r;
    };
    auto relu = [&](std::shared_ptr<TA> a) {
      auto r = g->pointwise(a, pw(fe::PointwiseMode_t::RELU_FWD));
      r->set_data_type(fe::DataType_t::FLOAT);
      return r;
    };
    y = op(y, channel("alpha", kI8Alpha), fe::PointwiseMode_t::MUL);
    y = op(y, channel("beta", kI8Beta), fe::PointwiseMode_t::ADD);
    if (s.relu) y = relu(y);
    if (s.residual) {
      constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: |v| <= 128 + 0.5 rounds half to even
      y = op(y, constant(-128.0f), fe::PointwiseMode_t::MAX);
      y = op(y, constant(127.0f), fe::PointwiseMode_t::MIN);
      y = op(y, constant(kMagic), fe::PointwiseMode_t::ADD);
      y = op(y, constant(kMagic), fe::PointwiseMode_t::SUB);
      y = op(y, scalar_in("res_scale", kI8ResScale), fe::PointwiseMode_t::MUL);
      auto z = g->tensor(TA().set_name("Z").set_uid(kI8Z).set_dim({k.n, k.m, k.oh, k.ow})
                             .set_stride(nhwc_strides(k.m, k.oh, k.ow)).set_data_type(fe::DataType_t::INT8));
      auto zf = op(z, scalar_in("z_scale", kI8ZScale), fe::PointwiseMode_t::MUL);
      y = op(y, zf, fe::PointwiseMode_t::ADD);
      if (s.residual_relu) y = relu(y);
    }
  }
  y->set_output(true)
      .set_uid(kI8Y)
      .set_dim({k.n, k.m, k.oh, k.ow})
      .set_stride(nhwc_strides(k.m, k.oh, k.ow))
      .set_data_type(s.fused ? fe_type(s.out) : fe::DataType_t::INT32);
  return g;
}

}  // namespace gpuopt::cuda
