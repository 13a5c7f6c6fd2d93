// Data-movement kernels that work on raw element sizes (any dtype of 1, 2, 4 or 8 bytes):
// one strided copy serves Transpose, Slice and Expand; plus Where and Gather.
#pragma once

#include "backends/cuda/elementwise.h"

#include <vector>

namespace gpuopt::cuda {

// out[i0..ir] = in[offset + sum_k i_k * in_strides[k]] (strides in elements; 0 broadcasts,
// negative walks backwards).
struct StridedDesc {
  int rank = 0;
  int64_t numel = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int64_t in_offset = 0;
};

// Picks 32-bit index math (magic-number division over merged axes) when the offsets allow.
Status launch_strided_copy(size_t elem_size, const void* in, void* out, const StridedDesc& d, cudaStream_t s);

// Transpose of the contiguous tensor `in_shape` by `perm` (empty: reverse the axes) into a
// contiguous output: one memcpy, a row copy with 16-byte accesses when the last axis stays last,
// 32x32 shared-memory tiles when it moves, the strided copy otherwise (layout_plan.h).
// `interleave` false (the Transpose op under GPUOPT_SMALL_C_TRANSPOSE=0) sends a small last axis
// to the strided copy instead of the interleave kernel.
Status launch_transpose(size_t elem_size, const void* in, void* out, const Shape& in_shape,
                        const std::vector<int64_t>& perm, cudaStream_t s, bool interleave = true);

// Pad: each output coordinate c maps to input index c - begin; outside [0, in_dim) constant mode
// writes `fill`, edge clamps, wrap is periodic and reflect mirrors without repeating the edge
// (periodically for pads longer than the axis), as the CPU reference does. One kernel for the
// whole output, whatever the rank (make_pad_desc merges unpadded axes and widens the element).
enum class PadMode : int { kConstant, kEdge, kReflect, kWrap };
struct PadDesc {
  int rank = 0;
  int64_t numel = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
  PadMode mode = PadMode::kEdge;
  size_t elem_size = 0;                // bytes moved per index (es, or a wider chunk of the last axis)
  unsigned char fill[16] = {};         // constant mode: the value's bytes, repeated over elem_size
};

// The descriptor for padding contiguous `in_shape` (element size es) by begin/end per axis
// (negative crops) into contiguous `out_shape`: adjacent axes without padding merged (a
// channels-last [N, H, W, C] padded in H and W is [N, H, W, C] with C one wide element), the
// last axis read as 16/8/4-byte chunks where its row allows and the pointers are aligned.
// `value` is es bytes (constant mode). Fails past kMaxRank axes after merging.
Result<PadDesc> make_pad_desc(size_t es, const Shape& in_shape, const Shape& out_shape, const std::vector<int64_t>& begin,
                              const std::vector<int64_t>& end, PadMode mode, const void* value, const void* in,
                              const void* out);

Status launch_pad_index(const void* in, void* out, const PadDesc& d, cudaStream_t s);

// y = cond ? a : b with numpy broadcasting of all three to `out_shape`.
Status launch_where(size_t elem_size, const bool* cond, const Shape& cond_shape, const void* a, const Shape& a_shape,
                    const void* b, const Shape& b_shape, void* y, const Shape& out_shape, cudaStream_t s);

// out[o, j, i] = data[o, idx[j], i]; data viewed as [outer, axis_dim, inner]; negative indices
// count from the end; an index out of range writes zeros and sets *bad (device flag) to 1.
Status launch_gather(size_t elem_size, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
                     const void* indices, bool indices_i64, int64_t num_indices, void* out, int* bad, cudaStream_t s);

}  // namespace gpuopt::cuda
