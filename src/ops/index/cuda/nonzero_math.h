// NonZero's per-element arithmetic, shared by the kernel (device) and the host unit test that
// checks it against the CPU reference without a GPU: which bits of an element make it non-zero,
// and how a flat row-major position splits into coordinates.
#pragma once

#include "core/dtype.h"

#include <cstdint>

#ifdef __CUDACC__
#define GPUOPT_NONZERO_HD __host__ __device__
#else
#define GPUOPT_NONZERO_HD
#endif

namespace gpuopt::cuda {

// Element width in bytes and the mask of the bits that make an element non-zero: every bit for
// integers and bool, every bit but the sign for floats (+0 and -0 are zero, NaN is not, as the
// reference's `value != 0`). False for dtypes the GPU NonZero does not take.
inline bool nonzero_value_bits(DType dt, int* bytes, uint64_t* mask) {
  switch (dt) {
    case DType::Bool: case DType::I8: case DType::U8: *bytes = 1; *mask = 0xFF; return true;
    case DType::I16: case DType::U16: *bytes = 2; *mask = 0xFFFF; return true;
    case DType::F16: case DType::BF16: *bytes = 2; *mask = 0x7FFF; return true;
    case DType::I32: case DType::U32: *bytes = 4; *mask = 0xFFFFFFFFu; return true;
    case DType::F32: *bytes = 4; *mask = 0x7FFFFFFFu; return true;
    case DType::I64: case DType::U64: *bytes = 8; *mask = ~uint64_t{0}; return true;
    case DType::F64: *bytes = 8; *mask = ~uint64_t{0} >> 1; return true;
    default: return false;
  }
}

// Coordinates of flat position `pos` in a row-major tensor of dims[0..rank).
GPUOPT_NONZERO_HD inline void nonzero_coords(int64_t pos, const int64_t* dims, int rank, int64_t* coord) {
  for (int a = rank - 1; a >= 0; --a) {
    coord[a] = pos % dims[a];
    pos /= dims[a];
  }
}

}  // namespace gpuopt::cuda
