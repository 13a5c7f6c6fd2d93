// Transpose and strided-copy planning (layout_plan.h).
#include "ops/tensor/cuda/layout_plan.h"

#include <cstdlib>
#include <cstring>

namespace gpuopt::cuda {

TransposePlan plan_transpose(const Shape& in, const std::vector<int64_t>& perm_in) {
  TransposePlan p;
  const int r = static_cast<int>(in.size());
  std::vector<int64_t> perm = perm_in;
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  p.numel = shape_numel(in);
  // Drop size-1 input axes: renumber the rest in input order.
  std::vector<int> index(static_cast<size_t>(r), -1);
  std::vector<int64_t> dims;
  for (int i = 0; i < r; ++i)
    if (in[i] != 1) {
      index[static_cast<size_t>(i)] = static_cast<int>(dims.size());
      dims.push_back(in[i]);
    }
  std::vector<int> q;  // output order of the kept axes
  for (int64_t a : perm)
    if (index[static_cast<size_t>(a)] >= 0) q.push_back(index[static_cast<size_t>(a)]);
  // Merge input axes a, a+1 that the output also visits as neighbours a, a+1.
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t k = 0; k + 1 < q.size(); ++k) {
      if (q[k + 1] != q[k] + 1) continue;
      const int a = q[k];
      dims[static_cast<size_t>(a)] *= dims[static_cast<size_t>(a) + 1];
      dims.erase(dims.begin() + a + 1);
      q.erase(q.begin() + static_cast<std::ptrdiff_t>(k) + 1);
      for (int& v : q)
        if (v > a) --v;
      merged = true;
      break;
    }
  }
  p.rank = static_cast<int>(dims.size());
  for (int i = 0; i < p.rank; ++i) {
    p.dims[i] = dims[static_cast<size_t>(i)];
    p.perm[i] = q[static_cast<size_t>(i)];
  }
  if (p.rank <= 1) {
    p.kind = TransposeKind::kCopy;
    p.why = "nothing moves: one copy";
    return p;
  }
  if (p.numel > kMax32) {
    p.why = "2^31 elements or more: 64-bit strided copy";
    return p;
  }
  const int last = p.rank - 1;
  if (p.perm[last] == last) {
    p.kind = TransposeKind::kRows;
    p.why = "last axis stays last: row copy";
    return p;
  }
  // [b, m, n] -> [b, n, m] (or [m, n] -> [n, m]) with few rows m: too short a side for tiles.
  const bool swap_last_two = (p.rank == 2 && p.perm[0] == 1) || (p.rank == 3 && p.perm[0] == 0 && p.perm[1] == 2);
  const int64_t m = p.dims[p.perm[last]];
  if (swap_last_two && m >= 2 && m <= kInterleaveMax) {
    p.kind = TransposeKind::kInterleave;
    p.why = "the output's last axis has 2-8 elements: rows interleaved";
    return p;
  }
  // The tile's sides are the output's last axis (input axis perm[last]) and the input's last.
  if (p.dims[p.perm[last]] < 8 || p.dims[last] < 8) {
    p.why = "an axis of the tile is shorter than 8: strided copy";
    return p;
  }
  p.kind = TransposeKind::kTiled;
  p.why = "last axis moves: tiled";
  return p;
}

int row_chunk_bytes(size_t es, int64_t row_elems, const void* in, const void* out) {
  const int64_t row_bytes = row_elems * static_cast<int64_t>(es);
  for (int w = 16; w > static_cast<int>(es); w /= 2)
    if (row_bytes % w == 0 && aligned_to(in, static_cast<size_t>(w)) && aligned_to(out, static_cast<size_t>(w)))
      return w;
  return static_cast<int>(es);
}

StridedDesc collapse_strided(const StridedDesc& d) {
  StridedDesc c;
  c.numel = d.numel;
  c.in_offset = d.in_offset;
  for (int k = 0; k < d.rank; ++k) {
    if (d.out_dims[k] == 1) continue;
    if (c.rank > 0 && c.in_strides[c.rank - 1] == d.in_strides[k] * d.out_dims[k]) {
      c.out_dims[c.rank - 1] *= d.out_dims[k];
      c.in_strides[c.rank - 1] = d.in_strides[k];
      continue;
    }
    c.out_dims[c.rank] = d.out_dims[k];
    c.in_strides[c.rank] = d.in_strides[k];
    ++c.rank;
  }
  return c;
}

bool strided_fits_32(const StridedDesc& d) {
  if (d.numel > kMax32) return false;
  // Every offset lies within in_offset +- sum of (extent - 1) * |stride|.
  int64_t lo = d.in_offset, hi = d.in_offset;
  for (int k = 0; k < d.rank; ++k) {
    const int64_t span = (d.out_dims[k] - 1) * d.in_strides[k];
    (span < 0 ? lo : hi) += span;
  }
  return lo >= 0 && hi <= kMax32;
}

Strided32 make_strided32(const StridedDesc& c) {
  Strided32 g;
  g.rank = c.rank;
  g.n = static_cast<uint32_t>(c.numel);
  g.offset = static_cast<int32_t>(c.in_offset);
  for (int k = 0; k < c.rank; ++k) {  // innermost first
    const int src = c.rank - 1 - k;
    g.dims[k] = FastDivmod(static_cast<uint32_t>(c.out_dims[src]));
    g.strides[k] = static_cast<int32_t>(c.in_strides[src]);
  }
  return g;
}

void transpose_strides(const TransposePlan& p, int64_t* in_st, int64_t* out_st) {
  int64_t a = 1, b = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    in_st[k] = a;
    a *= p.dims[k];
    out_st[k] = b;
    b *= p.dims[p.perm[k]];
  }
}

StridedDesc transpose_as_strided(const TransposePlan& p) {
  int64_t in_st[kMaxRank], out_st[kMaxRank];
  transpose_strides(p, in_st, out_st);
  StridedDesc d;
  d.rank = p.rank;
  d.numel = p.numel;
  for (int q = 0; q < p.rank; ++q) {
    d.out_dims[q] = p.dims[p.perm[q]];
    d.in_strides[q] = in_st[p.perm[q]];
  }
  return d;
}

Where32 make_where32(const Shape& out, const Shape& cond, const Shape& a, const Shape& b) {
  const int r = static_cast<int>(out.size());
  const Shape* ins[3] = {&cond, &a, &b};
  int64_t st[3][kMaxRank] = {};
  for (int o = 0; o < 3; ++o) {  // numpy broadcast strides: 0 along broadcast axes
    int64_t run = 1;
    const Shape& s = *ins[o];
    for (int k = r - 1; k >= 0; --k) {
      const int ks = k - (r - static_cast<int>(s.size()));
      const int64_t d = ks >= 0 ? s[ks] : 1;
      st[o][k] = d == 1 ? 0 : run;
      run *= d;
    }
  }
  // Drop size-1 axes; merge an axis into the previous kept one when all three walk the pair alike.
  int64_t dims[kMaxRank] = {}, cs[3][kMaxRank] = {};
  int n = 0;
  for (int k = 0; k < r; ++k) {
    if (out[k] == 1) continue;
    bool merge = n > 0;
    for (int o = 0; o < 3 && merge; ++o) merge = cs[o][n - 1] == st[o][k] * out[k];
    if (merge) {
      dims[n - 1] *= out[k];
      for (int o = 0; o < 3; ++o) cs[o][n - 1] = st[o][k];
      continue;
    }
    dims[n] = out[k];
    for (int o = 0; o < 3; ++o) cs[o][n] = st[o][k];
    ++n;
  }
  Where32 g;
  g.rank = n;
  g.n = static_cast<uint32_t>(shape_numel(out));
  for (int k = 0; k < n; ++k) {  // innermost first
    const int src = n - 1 - k;
    g.dims[k] = FastDivmod(static_cast<uint32_t>(dims[src]));
    for (int o = 0; o < 3; ++o) g.strides[o][k] = static_cast<uint32_t>(cs[o][src]);
  }
  return g;
}

RowsArgs make_rows(const TransposePlan& p, size_t es, int w) {
  int64_t in_st[kMaxRank], out_st[kMaxRank];
  transpose_strides(p, in_st, out_st);
  const int last = p.rank - 1;
  const int64_t chunk_elems = w / static_cast<int64_t>(es);  // rows are whole chunks (row_chunk_bytes)
  RowsArgs g;
  g.rank = last;
  g.chunks = static_cast<uint32_t>(p.numel / chunk_elems);
  g.per_row = FastDivmod(static_cast<uint32_t>(p.dims[last] / chunk_elems));
  for (int k = 0; k < g.rank; ++k) {  // innermost first
    const int q = last - 1 - k;
    g.dims[k] = FastDivmod(static_cast<uint32_t>(p.dims[p.perm[q]]));
    g.strides[k] = static_cast<uint32_t>(in_st[p.perm[q]] / chunk_elems);
  }
  return g;
}

TileArgs make_tiles(const TransposePlan& p) {
  int64_t in_st[kMaxRank], out_st[kMaxRank];
  transpose_strides(p, in_st, out_st);
  const int last = p.rank - 1;
  const int m_axis = p.perm[last];  // input axis that becomes the output's last
  int n_pos = 0;                    // output position of the input's last axis
  while (p.perm[n_pos] != last) ++n_pos;
  TileArgs g;
  g.m = static_cast<uint32_t>(p.dims[m_axis]);
  g.n = static_cast<uint32_t>(p.dims[last]);
  g.in_row_stride = static_cast<uint32_t>(in_st[m_axis]);
  g.out_col_stride = static_cast<uint32_t>(out_st[n_pos]);
  g.tiles_m = (g.m + kTile - 1) / kTile;
  g.tiles_n = (g.n + kTile - 1) / kTile;
  for (int q = last; q >= 0; --q) {  // batch axes: every other output position, innermost first
    if (q == last || q == n_pos) continue;
    const int a = p.perm[q];
    g.batch_dims[g.batch_rank] = FastDivmod(static_cast<uint32_t>(p.dims[a]));
    g.batch_in[g.batch_rank] = static_cast<uint32_t>(in_st[a]);
    g.batch_out[g.batch_rank] = static_cast<uint32_t>(out_st[q]);
    g.batch *= static_cast<uint32_t>(p.dims[a]);
    ++g.batch_rank;
  }
  return g;
}

SmallSideArgs make_small_side(const TransposePlan& p, size_t es, int align) {
  SmallSideArgs g;
  const int last = p.rank - 1;
  g.m = static_cast<uint32_t>(p.dims[p.perm[last]]);
  g.n = static_cast<uint32_t>(p.dims[last]);
  g.batch = p.rank == 3 ? static_cast<uint32_t>(p.dims[0]) : 1;
  const int64_t run = 16 / static_cast<int64_t>(es);
  g.vec = es <= 8 && align % 16 == 0 && g.n % run == 0;
  return g;
}

}  // namespace gpuopt::cuda

namespace gpuopt::cuda {

Result<PadDesc> make_pad_desc(size_t es, const Shape& in_shape, const Shape& out_shape, const std::vector<int64_t>& begin,
                              const std::vector<int64_t>& end, PadMode mode, const void* value, const void* in,
                              const void* out) {
  // Axes (outermost first) as [out, in, begin]; a run of unpadded axes is one axis.
  struct Axis {
    int64_t out, in, begin;
    bool padded;
  };
  std::vector<Axis> axes;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    const bool padded = begin[i] != 0 || end[i] != 0;
    if (!padded && in_shape[i] == 1) continue;
    if (!padded && !axes.empty() && !axes.back().padded) {
      axes.back().out *= in_shape[i];
      axes.back().in *= in_shape[i];
      continue;
    }
    axes.push_back({out_shape[i], in_shape[i], begin[i], padded});
  }
  if (axes.empty()) axes.push_back({1, 1, 0, false});
  if (axes.size() > static_cast<size_t>(kMaxRank))
    return Status::Unimplemented("Pad of {} to {} needs {} axes after merging (the CUDA limit is {})",
                                 shape_to_string(in_shape), shape_to_string(out_shape), axes.size(), kMaxRank);
  // The unpadded last axis moves in chunks as wide as its row and both pointers allow.
  size_t w = es;
  if (!axes.back().padded) {
    const size_t row = static_cast<size_t>(axes.back().in) * es;
    const auto addr = reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out);
    for (size_t c : {size_t{16}, size_t{8}, size_t{4}})
      if (c > es && row % c == 0 && addr % c == 0) {
        w = c;
        break;
      }
    axes.back().in = axes.back().out = static_cast<int64_t>(row / w);
  }
  PadDesc d;
  d.rank = static_cast<int>(axes.size());
  d.mode = mode;
  d.elem_size = w;
  d.numel = 1;
  int64_t stride = 1;
  for (int k = d.rank - 1; k >= 0; --k) {
    const Axis& a = axes[static_cast<size_t>(k)];
    d.out_dims[k] = a.out;
    d.in_dims[k] = a.in;
    d.begin[k] = a.begin;
    d.in_strides[k] = stride;
    stride *= a.in;
    d.numel *= a.out;
  }
  if (value)
    for (size_t o = 0; o + es <= w; o += es) std::memcpy(d.fill + o, value, es);
  return d;
}

}  // namespace gpuopt::cuda
