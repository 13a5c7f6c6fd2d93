// Host-side planning of Transpose and of the strided copy (layout.cu), kept apart from the
// kernels so a host unit test checks it without a GPU (tests/cuda/elementwise_plan_test.cpp).
//
//   TransposePlan p = plan_transpose({32, 128, 12, 64}, {0, 2, 1, 3});
//   // p.kind == TransposeKind::kRows: rows of 64 elements copied whole, 16 bytes per access
//
// Why: one thread per element with 64-bit `%` and `/` per axis ran BERT's 6 MB head transposes
// at a tenth of DRAM bandwidth.
#pragma once

#include "ops/elementwise/cuda/elementwise_plan.h"
#include "ops/tensor/cuda/layout.h"

#include <vector>

namespace gpuopt::cuda {

enum class TransposeKind : uint8_t {
  kCopy,     // the permutation moves nothing once size-1 axes are dropped: one memcpy
  kRows,     // the input's last axis stays last: whole rows, vector accesses, 32-bit index math
  kTiled,    // the last axis moves: 32x32 tiles through shared memory, coalesced on both sides
  kInterleave,  // [b, m, n] -> [b, n, m], m of 2..8 (NCHW -> NHWC of an image): SmallSideArgs
  kGeneral,  // the rest (short tile sides, 2^31 elements or more): the strided copy
};

struct TransposePlan {
  TransposeKind kind = TransposeKind::kGeneral;
  int rank = 0;  // after dropping size-1 axes and merging axes that stay together
  int64_t numel = 0;
  int64_t dims[kMaxRank] = {};  // collapsed input extents
  int perm[kMaxRank] = {};      // output axis q reads collapsed input axis perm[q]
  const char* why = "";
};

// `perm` must be a permutation of 0..rank-1 (the op checks it); an empty perm reverses.
TransposePlan plan_transpose(const Shape& in, const std::vector<int64_t>& perm);

// Bytes per access of the row copy: the widest of 16, 8, 4, 2 that divides a row and to which
// both pointers are aligned, never below the element size.
int row_chunk_bytes(size_t elem_size, int64_t row_elems, const void* in, const void* out);

// kRows: output = rows of `per_row` chunks of W bytes in output order; a row's input position is
// the sum of its coordinates times the input strides, in chunks, innermost axis first.
struct RowsArgs {
  int rank = 0;  // row axes: the output's axes but its last
  uint32_t chunks = 0;
  FastDivmod per_row;
  FastDivmod dims[kMaxRank];
  uint32_t strides[kMaxRank] = {};
};
RowsArgs make_rows(const TransposePlan& p, size_t elem_size, int chunk_bytes);
// Input chunk that output chunk j copies.
GPUOPT_EW_HD uint32_t rows_source(const RowsArgs& g, uint32_t j) {
  uint32_t row, off;
  g.per_row.divmod(j, &row, &off);
  GPUOPT_EW_UNROLL
  for (int k = 0; k < kMaxRank; ++k) {
    if (k >= g.rank) break;
    uint32_t c = row;
    if (k < g.rank - 1) g.dims[k].divmod(row, &row, &c);
    off += c * g.strides[k];
  }
  return off;
}

// kTiled: a batch of [m, n] -> [n, m] planes (m: the output's last axis, n: the input's last).
// Element (m, n) of batch b: in[ib + m * in_row_stride + n] -> out[ob + n * out_col_stride + m].
constexpr int kTile = 32, kTileRows = 8;
struct TileArgs {
  uint32_t m = 0, n = 0;
  uint32_t in_row_stride = 0;   // input stride of the m axis
  uint32_t out_col_stride = 0;  // output stride of the n axis
  uint32_t tiles_m = 0, tiles_n = 0, batch = 1;
  int batch_rank = 0;
  FastDivmod batch_dims[kMaxRank];  // innermost first
  uint32_t batch_in[kMaxRank] = {}, batch_out[kMaxRank] = {};
};
TileArgs make_tiles(const TransposePlan& p);
GPUOPT_EW_HD void tile_batch_offsets(const TileArgs& g, uint32_t b, uint32_t* ib, uint32_t* ob) {
  uint32_t rem = b, i = 0, o = 0;
  GPUOPT_EW_UNROLL
  for (int k = 0; k < kMaxRank; ++k) {
    if (k >= g.batch_rank) break;
    uint32_t c = rem;
    if (k < g.batch_rank - 1) g.batch_dims[k].divmod(rem, &rem, &c);
    i += c * g.batch_in[k];
    o += c * g.batch_out[k];
  }
  *ib = i;
  *ob = o;
}

// kInterleave: planes [m, n] -> [n, m] with m of 2..8 (the channels of a CNN's input), `batch`
// of them one after another in both tensors. Element (b, r, j): in[(b * m + r) * n + j] ->
// out[(b * n + j) * m + r]. With `vec`, each thread moves one run of 16 / elem_size positions j
// of all m rows: m 16-byte loads, one from each row, and m 16-byte stores (n a multiple of the run,
// both pointers 16-byte aligned); else one position j per thread, m elements each way.
constexpr int kInterleaveMax = 8;
struct SmallSideArgs {
  uint32_t m = 0, n = 0, batch = 0;
  bool vec = false;
};
// `align`: the largest power of two up to 16 dividing both pointers.
SmallSideArgs make_small_side(const TransposePlan& p, size_t elem_size, int align);
// (GPUOPT_SMALL_C_TRANSPOSE=0, launch_transpose's `interleave`, turns kInterleave into kGeneral:
// the A/B of the kernel.)

// The strided copy's output axes merged where the input walks them contiguously, size-1 axes
// dropped (same elements, same order).
StridedDesc collapse_strided(const StridedDesc& d);
// True when every element and every input offset fits the 32-bit kernel.
bool strided_fits_32(const StridedDesc& d);

// The 32-bit strided copy: merged axes innermost first; offsets stay within int32 (strided_fits_32).
struct Strided32 {
  int rank = 0;
  uint32_t n = 0;
  int32_t offset = 0;
  FastDivmod dims[kMaxRank];
  int32_t strides[kMaxRank] = {};
};
Strided32 make_strided32(const StridedDesc& collapsed);
GPUOPT_EW_HD int32_t strided32_offset(const Strided32& g, uint32_t i) {
  uint32_t rem = i;
  int32_t off = g.offset;
  GPUOPT_EW_UNROLL
  for (int k = 0; k < kMaxRank; ++k) {
    if (k >= g.rank) break;
    uint32_t c = rem;  // the outermost axis takes what is left
    if (k < g.rank - 1) g.dims[k].divmod(rem, &rem, &c);
    off += static_cast<int32_t>(c) * g.strides[k];
  }
  return off;
}

// Where's three-way broadcast over merged axes, innermost first, 32-bit offsets (out numel <=
// kMax32). Operand 0 is the condition, 1 and 2 the values.
struct Where32 {
  int rank = 0;
  uint32_t n = 0;
  FastDivmod dims[kMaxRank];
  uint32_t strides[3][kMaxRank] = {};
};
Where32 make_where32(const Shape& out, const Shape& cond, const Shape& a, const Shape& b);
GPUOPT_EW_HD void where32_offsets(const Where32& g, uint32_t i, uint32_t* oc, uint32_t* oa, uint32_t* ob) {
  uint32_t rem = i, c0 = 0, c1 = 0, c2 = 0;
  GPUOPT_EW_UNROLL
  for (int k = 0; k < kMaxRank; ++k) {
    if (k >= g.rank) break;
    uint32_t c = rem;
    if (k < g.rank - 1) g.dims[k].divmod(rem, &rem, &c);
    c0 += c * g.strides[0][k];
    c1 += c * g.strides[1][k];
    c2 += c * g.strides[2][k];
  }
  *oc = c0;
  *oa = c1;
  *ob = c2;
}

// Gather along an axis, data viewed as [outer, axis_dim, inner], in chunks of W bytes
// (row_chunk_bytes of the inner block): output chunk i is (o, j, c) with c < inner chunks.
struct Gather32 {
  uint32_t total = 0;  // output chunks
  FastDivmod inner;    // chunks per inner block
  FastDivmod nidx;
  uint32_t axis_dim = 0;
};
// Splits output chunk i into its outer index o, index position j and chunk c.
GPUOPT_EW_HD void gather32_split(const Gather32& g, uint32_t i, uint32_t* o, uint32_t* j, uint32_t* c) {
  uint32_t q;
  g.inner.divmod(i, &q, c);
  g.nidx.divmod(q, o, j);
}

// Contiguous strides of a plan's collapsed input, and of its output (output axis q has extent
// dims[perm[q]]).
void transpose_strides(const TransposePlan& p, int64_t* in_strides, int64_t* out_strides);
// The transpose as a general strided copy (kGeneral): output dims in order, input strides permuted.
StridedDesc transpose_as_strided(const TransposePlan& p);

}  // namespace gpuopt::cuda
