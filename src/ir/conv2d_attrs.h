// Which 2-D convolutions gpuopt's cuDNN kernels take, by attributes alone, so the CUDA backend
// (Conv, FusedConv, NhwcFusedConv) and the layout_nhwc pass agree on it without the pass
// depending on cuDNN.
#pragma once

#include "ir/graph.h"

namespace gpuopt {

// kernel_shape of rank 2 (it tells the rank before shapes are known), symmetric explicit pads or
// VALID, 2-D strides and dilations.
inline bool conv2d_attrs_supported(const Node& n) {
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") return false;
  if (n.attr_ints("kernel_shape").size() != 2) return false;
  const auto pads = n.attr_ints("pads");
  if (!pads.empty() && (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])) return false;
  const auto st = n.attr_ints("strides"), dl = n.attr_ints("dilations");
  return (st.empty() || st.size() == 2) && (dl.empty() || dl.size() == 2);
}

}  // namespace gpuopt
