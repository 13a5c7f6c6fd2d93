// launch_depthwise_nhwc (depthwise.h). Thread = (image, output row, OWT adjacent output
// columns, VEC adjacent channels); consecutive threads take consecutive channel groups, so a
// warp's loads of one input pixel are contiguous. Accumulation in f32. The tiles and their
// dispatch are depthwise_tile.cuh's.
#include "ops/conv/cuda/depthwise_tile.cuh"
#include "core/cuda_check.h"

namespace gpuopt::cuda {
namespace {

using dw::kThreads;
using dw::Params;

template <typename T, int VEC, class Tile, ConvAct A>
__global__ void __launch_bounds__(kThreads) depthwise_flat(Params p, int64_t total) {
  constexpr int OWT = Tile::OWT;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int cg = static_cast<int>(idx % p.cg);
    int64_t r = idx / p.cg;
    const int ob = static_cast<int>(r % p.owb);
    r /= p.owb;
    const int oy = static_cast<int>(r % p.oh);
    const int64_t img = r / p.oh;
    const int c0 = cg * VEC, ox0 = ob * OWT;
    float acc[OWT][VEC];
    Tile::template compute<A>(p, img, oy, ox0, c0, acc);
    const int64_t pix0 = (img * p.oh + oy) * p.ow + ox0;
#pragma unroll
    for (int t = 0; t < OWT; ++t)
      if (ox0 + t < p.ow) dw::finish<T, VEC>(p, acc[t], pix0 + t, c0);
  }
}

// The wide tile (4 channels x 8 columns) converts each loaded input to f32 for twice as many
// multiply-adds as the narrow one (8 channels x 4 columns at stride 1, 2 at stride 2), in 109
// registers instead of 160 at 7x7 stride 1: there the narrow tile ran at 19% occupancy with the
// FMA pipe 25% busy (ncu), the wide one at 25% occupancy, 1.9x faster (docs/perf-notes.md).
struct Flat {
  template <typename T, int VEC, class Tile>
  void run(const Params& p, cudaStream_t s) const {
    const int64_t total = int64_t(p.n) * p.oh * p.owb * p.cg;
    dw::with_in_act(p.in_act, [&](auto a) {
      depthwise_flat<T, VEC, Tile, decltype(a)::value><<<kern::grid_for(total, kThreads), kThreads, 0, s>>>(p, total);
    });
  }
};

}  // namespace

Status launch_depthwise_nhwc(const DepthwiseArgs& a, cudaStream_t s) {
  if (a.n == 0 || a.oh == 0 || a.ow == 0 || a.c == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(dw::dispatch(a, Flat{}, s));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
