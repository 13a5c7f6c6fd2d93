// Concrete shapes are vectors of non-negative extents. In the IR a dimension may also be
// unknown (kUnknownDim) or symbolic (<= kFirstSymbolDim, one id per symbol name, so equal
// symbols compare equal as integers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuopt {

using Shape = std::vector<int64_t>;
constexpr int64_t kUnknownDim = -1;
constexpr int64_t kFirstSymbolDim = -2;

inline bool dim_is_known(int64_t d) { return d >= 0; }
bool shape_is_concrete(const Shape& s);
// Product of extents; -1 when any is unknown or symbolic.
int64_t shape_numel(const Shape& s);
// "[1,3,224,224]"; symbolic dims print as "?" unless names are given.
std::string shape_to_string(const Shape& s);
// Row-major strides in elements.
std::vector<int64_t> shape_strides(const Shape& s);
// Normalises a possibly-negative axis into [0, rank); returns false when out of range.
bool normalize_axis(int64_t* axis, int64_t rank);

}  // namespace gpuopt
