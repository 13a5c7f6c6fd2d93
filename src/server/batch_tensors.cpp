#include "server/batch_tensors.h"

#include <cstring>

#include "core/dispatch.h"

namespace gpuopt::server {
namespace {

// Splits a shape around `axis`: outer (dims before, incl. batch) * len * inner (dims after).
void split_at(const Shape& s, int axis, int64_t* outer, int64_t* len, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; ++i) *outer *= s[static_cast<size_t>(i)];
  *len = s[static_cast<size_t>(axis)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < s.size(); ++i) *inner *= s[i];
}

void fill_pad(Tensor* t, int64_t from, int64_t count, double pad) {
  if (count <= 0) return;
  if (t->dtype() == DType::String) {
    for (int64_t i = 0; i < count; ++i) t->strings()[static_cast<size_t>(from + i)].clear();
    return;
  }
  dispatch_dtype(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = from_f64<T>(pad);
    T* p = t->data<T>() + from;
    for (int64_t i = 0; i < count; ++i) p[i] = v;
  });
}

// Copies `count` elements from src[si] to dst[di] (same dtype).
void copy_elems(Tensor* dst, int64_t di, const Tensor& src, int64_t si, int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::String) {
    for (int64_t i = 0; i < count; ++i)
      dst->strings()[static_cast<size_t>(di + i)] = src.strings()[static_cast<size_t>(si + i)];
    return;
  }
  size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst->raw()) + di * es, static_cast<const char*>(src.raw()) + si * es,
              static_cast<size_t>(count) * es);
}

}  // namespace

Tensor concat_rows(const std::vector<const Tensor*>& parts, int axis, int64_t length, double pad,
                   const std::function<Tensor(DType, const Shape&)>& alloc) {
  const Tensor& first = *parts[0];
  Shape shape = first.shape();
  int64_t rows = 0;
  for (const Tensor* p : parts) rows += p->dim(0);
  shape[0] = rows;
  bool padded = axis > 0 && axis < static_cast<int>(shape.size()) && length >= 0;
  if (padded) shape[static_cast<size_t>(axis)] = length;
  Tensor out = alloc && first.dtype() != DType::String ? alloc(first.dtype(), shape) : Tensor();
  if (!out.defined()) out = Tensor::empty(first.dtype(), shape);
  int64_t at = 0;
  for (const Tensor* p : parts) {
    if (!padded || p->dim(axis) == length) {
      copy_elems(&out, at, *p, 0, p->numel());
      at += p->numel();
      continue;
    }
    int64_t outer, len, inner;
    split_at(p->shape(), axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; ++o) {
      copy_elems(&out, at, *p, o * len * inner, len * inner);
      fill_pad(&out, at + len * inner, (length - len) * inner, pad);
      at += length * inner;
    }
  }
  return out;
}

Tensor slice_rows(const Tensor& t, int64_t row, int64_t rows, int axis, int64_t length) {
  Shape shape = t.shape();
  int64_t row_elems = rows > 0 && t.dim(0) > 0 ? t.numel() / t.dim(0) : 0;
  if (t.dim(0) > 0) row_elems = t.numel() / t.dim(0);
  bool cut =
      axis > 0 && axis < static_cast<int>(shape.size()) && length >= 0 && length != shape[static_cast<size_t>(axis)];
  if (!cut) {
    shape[0] = rows;
    if (row == 0 && rows == t.dim(0)) return t;
    if (t.dtype() != DType::String)
      return Tensor::wrap(t.dtype(), shape, t.storage(),
                          t.offset() + static_cast<size_t>(row * row_elems) * dtype_size(t.dtype()));
    Tensor out = Tensor::empty(t.dtype(), shape);
    copy_elems(&out, 0, t, row * row_elems, rows * row_elems);
    return out;
  }
  Shape src_piece = shape;
  src_piece[0] = rows;
  int64_t outer, len, inner;
  split_at(src_piece, axis, &outer, &len, &inner);
  shape[0] = rows;
  shape[static_cast<size_t>(axis)] = length;
  Tensor out = Tensor::empty(t.dtype(), shape);
  int64_t base = row * row_elems;
  for (int64_t o = 0; o < outer; ++o) copy_elems(&out, o * length * inner, t, base + o * len * inner, length * inner);
  return out;
}

}  // namespace gpuopt::server
