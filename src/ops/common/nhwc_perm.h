// The channels-last permutations the NHWC ops (NhwcFusedConv, NhwcMaxPool, Int8Conv) share.
#pragma once

#include "core/shape.h"

#include <cstdint>
#include <vector>

namespace gpuopt::nhwc {

// nchw[d] = nhwc[kToNchw[d]] (for W: [M, kH, kW, C] -> [M, C, kH, kW]); back with kToNhwc.
inline const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
inline const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};

// out[d] = s[perm[d]].
inline Shape permute(const Shape& s, const std::vector<int64_t>& perm) {
  Shape o(s.size());
  for (size_t d = 0; d < s.size(); ++d) o[d] = s[static_cast<size_t>(perm[d])];
  return o;
}

}  // namespace gpuopt::nhwc
