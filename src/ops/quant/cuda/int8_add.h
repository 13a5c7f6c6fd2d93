// Int8Add on the GPU (int8_add.cpp, int8_add.cu): y = act(a * sa + b * sb), then int8
// (round half to even of v / sy, saturated) or f16/f32; 8 elements per thread.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct Int8AddArgs {
  int64_t n = 0;
  const int8_t* a = nullptr;
  const int8_t* b = nullptr;
  DType scale_dt = DType::F32;  // of the scales: f32 or f16
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* y_scale = nullptr;  // null: float output of out_dt
  bool relu = false;
  DType out_dt = DType::I8;
  void* y = nullptr;
};

Status launch_int8_add(const Int8AddArgs& a, cudaStream_t s);

}  // namespace gpuopt::cuda
