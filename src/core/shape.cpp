#include "core/shape.h"

#include <fmt/format.h>

namespace gpuopt {

bool shape_is_concrete(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) return false;
  return true;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i] >= 0 ? fmt::format("{}", s[i]) : std::string("?");
  }
  return out + "]";
}

std::vector<int64_t> shape_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

bool normalize_axis(int64_t* axis, int64_t rank) {
  if (*axis < -rank || *axis >= rank) return false;
  if (*axis < 0) *axis += rank;
  return true;
}

}  // namespace gpuopt
