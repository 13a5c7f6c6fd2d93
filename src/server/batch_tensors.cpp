#include "server/batch_tensors.h"

#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "core/parallel_copy.h"
#include "core/thread_pool.h"

namespace gpuopt::server {
namespace {

// One block of a batch being formed: `n` bytes from `src` to `dst` (blocks never overlap).
struct Copy {
  char* dst;
  const char* src;
  size_t n;
};

// Copies the blocks, spread over the CPU pool's threads when they add up to megabytes: one core
// copies ~10 GB/s, so gathering a ResNet-50 batch of 32 (19 MB of f32) took 1.6 ms on the
// batcher's thread, which then formed at most ~600 batches a second. Each thread takes a
// contiguous range of the bytes, whichever blocks it spans.
void run_copies(const std::vector<Copy>& copies) {
  std::vector<size_t> start(copies.size() + 1, 0);  // each block's first byte in the whole
  for (size_t i = 0; i < copies.size(); ++i) start[i + 1] = start[i] + copies[i].n;
  const size_t total = start.back();
  if (total < kParallelCopyMin) {
    for (const Copy& c : copies)
      if (c.n) std::memcpy(c.dst, c.src, c.n);
    return;
  }
  constexpr int64_t kPerThread = int64_t{2} << 20;  // below this a thread costs more than it saves
  parallel_for(static_cast<int64_t>(total), kPerThread, [&](int64_t b, int64_t e) {
    const size_t lo = static_cast<size_t>(b), hi = static_cast<size_t>(e);
    size_t i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), lo) - start.begin()) - 1;
    for (; i < copies.size() && start[i] < hi; ++i) {
      const size_t from = std::max(lo, start[i]), to = std::min(hi, start[i + 1]);
      if (to > from) std::memcpy(copies[i].dst + (from - start[i]), copies[i].src + (from - start[i]), to - from);
    }
  });
}

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
  // Numeric parts: the blocks are listed (the pads written) first, then copied together.
  const bool strings = first.dtype() == DType::String;
  const size_t es = strings ? 0 : dtype_size(first.dtype());
  std::vector<Copy> copies;
  auto copy = [&](int64_t di, const Tensor& src, int64_t si, int64_t count) {
    if (strings) return copy_elems(&out, di, src, si, count);
    if (count > 0)
      copies.push_back({static_cast<char*>(out.raw()) + di * static_cast<int64_t>(es),
                        static_cast<const char*>(src.raw()) + si * static_cast<int64_t>(es), static_cast<size_t>(count) * es});
  };
  int64_t at = 0;
  for (const Tensor* p : parts) {
    if (!padded || p->dim(axis) == length) {
      copy(at, *p, 0, p->numel());
      at += p->numel();
      continue;
    }
    int64_t outer, len, inner;
    split_at(p->shape(), axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; ++o) {
      copy(at, *p, o * len * inner, len * inner);
      fill_pad(&out, at + len * inner, (length - len) * inner, pad);
      at += length * inner;
    }
  }
  run_copies(copies);
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
