// Kernel timing shared by the standalone micro-benchmarks (scripts/gpu/conv8, res8): the median of
// `it` launches, each between its own pair of CUDA events, after `warm` warm-up launches, with a
// ~10 ms spin kernel first so the host queues every timed launch before the first runs (the
// events then time the kernels, not the host's launch cost). -1 on a CUDA error.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v.empty() ? -1.f : v[v.size() / 2]; }
__global__ void spin(long long cycles) { const long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
template <class F> static float time_median(F&& launch, int warm = 5, int it = 20) {
  for (int i = 0; i < warm; ++i) launch();
  std::vector<cudaEvent_t> ev(2 * it);
  for (auto& e : ev) cudaEventCreate(&e);
  spin<<<1, 1>>>(20000000LL);
  for (int i = 0; i < it; ++i) { cudaEventRecord(ev[2 * i]); launch(); cudaEventRecord(ev[2 * i + 1]); }
  cudaEventSynchronize(ev.back());
  std::vector<float> t(it);
  for (int i = 0; i < it; ++i) cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]);
  for (auto& e : ev) cudaEventDestroy(e);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) { printf("# cuda error %s\n", cudaGetErrorString(err)); return -1.f; }
  return median(t);
}
