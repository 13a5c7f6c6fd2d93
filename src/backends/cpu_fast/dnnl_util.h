// What the oneDNN kernels (conv_dnnl.cpp, gemm_dnnl.cpp) share; included only where
// GPUOPT_HAVE_DNNL is defined.
//
//   dnnl::stream& s = thread_stream();   // also: oneDNN runs on this thread alone
//   prim.execute(s, args); s.wait();
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

namespace gpuopt::cpu_fast {

// The process's CPU engine.
dnnl::engine& cpu_engine();
// The calling thread's stream. The first call also sets the thread's OpenMP thread count to one,
// so a primitive made or run here computes on this thread and libgomp starts no team.
dnnl::stream& thread_stream();
// n floats of v (resized as needed) starting at a 64-byte boundary: oneDNN's preferred alignment,
// and a scratchpad's parts are laid out from its start.
float* aligned(std::vector<float>& v, int64_t n);

}  // namespace gpuopt::cpu_fast
