// The CPU worker threads, shared by the reference's heavy kernels (MatMul/Gemm, Conv) and the fast
// CPU backend's kernels (backends/cpu_fast): a pool of GPUOPT_NUM_THREADS threads (default: the
// physical cores this process may use), started on first use.
//
//   parallel_for(rows, 16, [&](int64_t begin, int64_t end) { for (r = begin; r < end; ++r) ...; });
//
// [0, n) is cut into contiguous chunks of at least `min_chunk`, at most one per thread; the
// caller runs the first and waits for the rest. A kernel gives each chunk whole output elements,
// each summed in its usual order, so results do not depend on the thread count. Called from
// inside a chunk (nested), it runs inline.
#pragma once

#include <cstdint>
#include <functional>

namespace gpuopt {

// Threads the pool uses (GPUOPT_NUM_THREADS, else the physical cores of the affinity mask; >= 1).
int cpu_threads();

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t begin, int64_t end)>& f);

// As parallel_for, with at most `max_chunks` chunks (capped at cpu_threads()): the fast CPU
// backend's share of the pool when several sessions or server instances run at once.
void parallel_for_max(int64_t n, int64_t min_chunk, int64_t max_chunks,
                      const std::function<void(int64_t begin, int64_t end)>& f);

}  // namespace gpuopt
