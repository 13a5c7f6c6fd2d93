#include "core/shape.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace gpuopt {

bool shape_is_concrete(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) return false;
  return true;
}

int64_t shape_numel(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) return -1;
  const std::optional<int64_t> n = checked_numel(s);
  return n ? *n : std::numeric_limits<int64_t>::max();
}

bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

bool checked_add(int64_t a, int64_t b, int64_t* out) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

std::optional<int64_t> checked_numel(const Shape& s) {
  bool zero = false;
  for (int64_t d : s) {
    if (d < 0) return std::nullopt;
    zero = zero || d == 0;
  }
  if (zero) return int64_t{0};  // [0, 2^40, 2^40] is empty, not an overflow
  int64_t n = 1;
  for (int64_t d : s)
    if (!checked_mul(n, d, &n)) return std::nullopt;
  return n;
}

std::optional<uint64_t> checked_nbytes(const Shape& s, size_t elem_size) {
  const std::optional<int64_t> n = checked_numel(s);
  if (!n) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(*n), static_cast<uint64_t>(elem_size), &bytes)) return std::nullopt;
  return bytes;
}

std::optional<int64_t> extent_from_double(double v) {
  // 2^62: well inside int64 so a later "+ 1" or "* 2" of the result cannot wrap either.
  if (!std::isfinite(v) || v < 0.0 || v >= 4611686018427387904.0) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string dims_string(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "]";
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
