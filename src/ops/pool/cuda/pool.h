// The window pools' kernel call from a node, shared by MaxPool/AveragePool (NCHW, pool.cpp)
// and NhwcMaxPool's own-kernel path (nhwc_pool.cpp): kernel_shape, strides, pads (top/left)
// and dilations from the attributes, sizes from x and y in either layout.
#pragma once

#include "backends/cuda/cuda_ops.h"

namespace gpuopt::cuda {

// max: MaxPool, else AveragePool (count_include_pad read from the node); nhwc: x [n, h, w, c].
Status run_pool2d(CudaKernelContext& k, bool max, bool nhwc);

}  // namespace gpuopt::cuda
