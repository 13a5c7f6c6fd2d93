// NonZero on the GPU: the row-major positions of the non-zero elements, written as int64
// [rank, count] (a scalar as [1, count]). The count is known before the launch (the executor
// infers NonZero's data-dependent shape from a host copy of the input), so the kernel only fills
// the indices: CUB's DeviceSelect picks the flat positions into the last output row, then each
// position is split into its coordinates in place.
//
//   size_t bytes = 0;
//   GPUOPT_RETURN_IF_ERROR(nonzero_scratch_bytes(DType::F16, n, &bytes));
//   GPUOPT_RETURN_IF_ERROR(launch_nonzero(DType::F16, x, shape, count, out, scratch, bytes, stream));
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

#include <cstddef>
#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// Element types NonZero takes on the GPU: f32, f16, bf16, f64, i8, u8, i16, u16, i32, u32,
// i64, u64, bool. Zero means +0 or -0 for the floats (NaN counts as non-zero, as on the CPU).
bool nonzero_dtype_supported(DType dt);

// Device scratch launch_nonzero needs for n input elements (CUB's temporary storage and the
// selected count).
Status nonzero_scratch_bytes(DType dt, int64_t n, size_t* bytes);

// out: int64 [max(rank, 1), count], count = the number of non-zero elements of x (shape `shape`).
Status launch_nonzero(DType dt, const void* x, const Shape& shape, int64_t count, int64_t* out, void* scratch,
                      size_t scratch_bytes, cudaStream_t s);

}  // namespace gpuopt::cuda
