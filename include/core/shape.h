// Concrete shapes are vectors of non-negative extents. In the IR a dimension may also be
// unknown (kUnknownDim) or symbolic (<= kFirstSymbolDim, one id per symbol name, so equal
// symbols compare equal as integers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

using Shape = std::vector<int64_t>;
constexpr int64_t kUnknownDim = -1;
constexpr int64_t kFirstSymbolDim = -2;

inline bool dim_is_known(int64_t d) { return d >= 0; }
bool shape_is_concrete(const Shape& s);
// Product of extents; -1 when any is unknown or symbolic. Saturates at INT64_MAX instead of
// wrapping (load-time inference refuses such shapes first; see checked_numel).
int64_t shape_numel(const Shape& s);

// Overflow-checked arithmetic for extents, element counts and byte counts computed from model
// data (a hostile model must not wrap an int64 around): false, *out untouched, on overflow.
// Every shape computed from a model's numbers goes through these.
bool checked_mul(int64_t a, int64_t b, int64_t* out);
bool checked_add(int64_t a, int64_t b, int64_t* out);
// Elements of a concrete shape; nullopt when a dim is negative or the product overflows int64.
std::optional<int64_t> checked_numel(const Shape& s);
// Bytes of a concrete shape of `elem_size`-byte elements; nullopt on a negative dim or overflow.
std::optional<uint64_t> checked_nbytes(const Shape& s, size_t elem_size);
// An extent computed in floating point (Resize's scale * dim, Range's count): nullopt when it is
// not finite or does not fit an int64 (casting such a double is undefined behaviour).
std::optional<int64_t> extent_from_double(double v);
// "[1,3,224,224]"; symbolic dims print as "?" unless names are given.
std::string shape_to_string(const Shape& s);
// "[1,-1,3]": every number as it is (config dims, attribute lists), -1 included.
std::string dims_string(const std::vector<int64_t>& v);
// Row-major strides in elements.
std::vector<int64_t> shape_strides(const Shape& s);
// Normalises a possibly-negative axis into [0, rank); returns false when out of range.
bool normalize_axis(int64_t* axis, int64_t rank);

}  // namespace gpuopt
