// The fast CPU backend (`--device cpu`): the CPU executor with the f32 kernels of
// backends/cpu_fast (OpenBLAS GEMMs, attention, norms, elementwise) where they apply and the
// reference kernels elsewhere. make_cpu_backend() (backend.h) is the reference (`cpu-ref`).
//
//   std::unique_ptr<Backend> b = make_fast_cpu_backend();      // threads: the pool's share
//   std::unique_ptr<Backend> one = make_fast_cpu_backend(1);   // every kernel on the calling thread
#pragma once

#include "backends/backend.h"

namespace gpuopt {

// max_threads caps the threads its runs use (0: cpu_threads() divided among the runs in flight).
std::unique_ptr<Backend> make_fast_cpu_backend(int max_threads = 0);

}  // namespace gpuopt
