// Host dispatch for the data-movement kernels (Gather/Scatter, Transpose, Pad, ...): they move
// bits, so f(E{}) is called with the unsigned type of the element size.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>

namespace gpuopt::cuda {

template <typename F>
Status by_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); return Status::Ok();
    case 2: f(uint16_t{}); return Status::Ok();
    case 4: f(uint32_t{}); return Status::Ok();
    case 8: f(uint64_t{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA data movement of {}-byte elements", es);
  }
}

}  // namespace gpuopt::cuda
