// The generic "gather by per-dimension offset tables" routine (declared in tensor_util.h) that
// Transpose, Slice, Expand, Tile, Pad and DepthToSpace share, and a transpose through it.
#include "ops/common/tensor_util.h"

#include <cstring>

namespace gpuopt {
namespace tensor_util {

void gather_by_tables(const Tensor& in, Tensor& out, const std::vector<std::vector<int64_t>>& tables,
                      const void* fill, const std::string& fill_str) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const size_t r = out.shape().size();
  const bool is_str = in.dtype() == DType::String;
  const size_t es = dtype_size(in.dtype());
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  auto put = [&](int64_t o, int64_t s) {
    if (is_str) out.strings()[o] = s < 0 ? fill_str : in.strings()[s];
    else if (s >= 0) std::memcpy(dst + o * es, src + s * es, es);
    else if (fill) std::memcpy(dst + o * es, fill, es);
    else std::memset(dst + o * es, 0, es);
  };
  if (r == 0) {
    put(0, 0);
    return;
  }
  const std::vector<int64_t>& inner = tables[r - 1];
  const int64_t inner_n = out.shape()[r - 1];
  bool inner_contig = true;
  for (int64_t j = 1; j < inner_n && inner_contig; ++j) inner_contig = inner[j] == inner[0] + j && inner[0] >= 0;
  if (inner_n > 0 && inner[0] < 0) inner_contig = false;
  std::vector<int64_t> c(r, 0);
  int64_t o = 0;
  while (o < n) {
    int64_t base = 0;
    bool outside = false;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t t = tables[d][c[d]];
      if (t < 0) outside = true;
      base += t;
    }
    if (!outside && inner_contig && !is_str) {
      std::memcpy(dst + o * es, src + (base + inner[0]) * es, static_cast<size_t>(inner_n) * es);
    } else {
      for (int64_t j = 0; j < inner_n; ++j) put(o + j, outside || inner[j] < 0 ? -1 : base + inner[j]);
    }
    o += inner_n;
    for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
      if (++c[d] < out.shape()[d]) break;
      c[d] = 0;
    }
  }
}

void transpose_view(const Tensor& in, const Shape& view_shape, const std::vector<int64_t>& perm, Tensor& out) {
  const std::vector<int64_t> st = shape_strides(view_shape);
  std::vector<std::vector<int64_t>> tables(perm.size());
  Shape out_shape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    out_shape[d] = view_shape[perm[d]];
    tables[d].resize(static_cast<size_t>(out_shape[d]));
    for (int64_t i = 0; i < out_shape[d]; ++i) tables[d][i] = i * st[perm[d]];
  }
  Tensor view = Tensor::wrap(out.dtype(), out_shape, out.storage(), out.offset());
  gather_by_tables(in, view, tables);
}

}  // namespace tensor_util

}  // namespace gpuopt
