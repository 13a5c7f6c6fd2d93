// Host side of the CUDA QLinearConv: the descriptor for a node (kept out of qconv.h so the kernel
// file does not compile the graph headers).
#pragma once

#include "ops/quant/cuda/qconv.h"
#include "ir/graph.h"

namespace gpuopt::cuda {

struct QConvInputs {
  Shape x_shape, w_shape;
  DType x_dt = DType::U8, w_dt = DType::U8, y_dt = DType::U8;
  double x_scale = 1, y_scale = 1, y_zp = 0;
  int64_t x_zp = 0;
  int64_t w_scale_count = 1, w_zp_count = 1, bias_count = 0;
};

Result<QConvDesc> make_qconv_desc(const Node& node, const QConvInputs& q);

}  // namespace gpuopt::cuda
