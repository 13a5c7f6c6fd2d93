// Which convolutions gpuopt's cuDNN kernels take, by attributes alone, so the CUDA backend
// (Conv, FusedConv, NhwcFusedConv, ConvTranspose) and the layout_nhwc pass agree on it without
// the pass depending on cuDNN.
//
//   if (conv_attrs_supported(node, 3)) ...  // 1-D, 2-D or 3-D, symmetric pads
#pragma once

#include "ir/graph.h"

namespace gpuopt {

// kernel_shape of rank 1..max_rank (it tells the rank before shapes are known), symmetric
// explicit pads or VALID, strides and dilations of that rank.
inline bool conv_attrs_supported(const Node& n, size_t max_rank) {
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") return false;
  const size_t nd = n.attr_ints("kernel_shape").size();
  if (nd < 1 || nd > max_rank) return false;
  const auto pads = n.attr_ints("pads");
  if (!pads.empty()) {
    if (pads.size() != 2 * nd) return false;
    for (size_t i = 0; i < nd; ++i)
      if (pads[i] != pads[nd + i]) return false;
  }
  const auto st = n.attr_ints("strides"), dl = n.attr_ints("dilations");
  return (st.empty() || st.size() == nd) && (dl.empty() || dl.size() == nd);
}

// The same for 2-D only (the channels-last kernels).
inline bool conv2d_attrs_supported(const Node& n) {
  return conv_attrs_supported(n, 2) && n.attr_ints("kernel_shape").size() == 2;
}

}  // namespace gpuopt
