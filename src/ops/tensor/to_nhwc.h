// ToNhwc's output type (to_nhwc.cpp), shared by its schema and its CUDA kernel.
#pragma once

#include "core/dtype.h"
#include "core/status.h"
#include "ir/graph.h"

namespace gpuopt {

// Y's dtype: the 'to' attribute (f32, f16 or bf16), or X's when it is absent.
Result<DType> to_nhwc_out_dtype(const Node& node, DType in);

}  // namespace gpuopt
