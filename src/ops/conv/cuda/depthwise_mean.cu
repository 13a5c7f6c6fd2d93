// launch_depthwise_nhwc_mean and launch_spatial_mean_nhwc (depthwise.h): the depthwise conv that
// also writes the spatial mean of its output per (image, channel), and that mean alone over an
// existing channels-last tensor (the fallback when cuDNN ran the conv).
//
// Block = (channel slab, slice of output rows, image): thread (slab channel group, lane) computes
// the tiles of its channel group at positions lane, lane + lanes, ... of its rows (the same tiles
// and epilogue as depthwise.cu), summing what it stored; the lanes' sums meet in shared memory
// and the block writes one f32 partial per channel. A second small kernel adds the slices'
// partials in order and divides: no atomics, so the result is the same on every run.
#include "ops/conv/cuda/depthwise_tile.cuh"
#include "core/cuda_check.h"

#include <algorithm>

namespace gpuopt::cuda {
namespace {

using dw::kThreads;
using dw::Params;

// The grid over (slab, slice, image). slices: the output rows split so that the launch has about
// kBlocks blocks (at least one row per slice), a few waves of the H200's 132 SMs with each thread
// still computing several tiles (EfficientNet-B0's first SE conv at b256: 16 slices of 7 rows, 6
// tiles per thread); a function of the shape only, so the workspace is known before the launch.
constexpr int64_t kBlocks = 4096;

int64_t mean_slices(int64_t n, int64_t c, int64_t oh) {
  const int64_t slabs = std::max<int64_t>(1, c / 128);
  const int64_t want = (kBlocks + n * slabs - 1) / (n * slabs);
  return std::clamp<int64_t>(want, 1, oh);
}

struct MeanGrid {
  int slabs, slices, rows_per_slice, cgb, lanes;
  float* partial;  // [n, slices, c]
};

template <typename T, int VEC, class Tile, ConvAct A>
__global__ void __launch_bounds__(kThreads) depthwise_mean(Params p, MeanGrid m) {
  constexpr int OWT = Tile::OWT;
  __shared__ float red[VEC][kThreads];
  int64_t b = blockIdx.x;
  const int slab = static_cast<int>(b % m.slabs);
  b /= m.slabs;
  const int slice = static_cast<int>(b % m.slices);
  const int64_t img = b / m.slices;
  const int cgl = threadIdx.x % m.cgb, lane = threadIdx.x / m.cgb;
  const int cg = slab * m.cgb + cgl;
  const int c0 = cg * VEC;
  float sum[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) sum[v] = 0.f;
  if (lane < m.lanes && cg < p.cg) {
    const int row0 = slice * m.rows_per_slice;
    const int row1 = min(p.oh, row0 + m.rows_per_slice);
    const int end = row1 * p.owb;
    for (int pos = row0 * p.owb + lane; pos < end; pos += m.lanes) {
      const int oy = pos / p.owb, ox0 = (pos % p.owb) * OWT;
      float acc[OWT][VEC];
      Tile::template compute<A>(p, img, oy, ox0, c0, acc);
      dw::finish_sum<T, VEC, OWT>(p, acc, (img * p.oh + oy) * p.ow + ox0, ox0, c0, sum);
    }
  }
#pragma unroll
  for (int v = 0; v < VEC; ++v) red[v][threadIdx.x] = sum[v];
  __syncthreads();
  if (lane != 0 || cg >= p.cg) return;
  for (int l = 1; l < m.lanes; ++l)
#pragma unroll
    for (int v = 0; v < VEC; ++v) sum[v] += red[v][l * m.cgb + cgl];
  float* out = m.partial + (img * m.slices + slice) * p.c + c0;
#pragma unroll
  for (int v = 0; v < VEC; ++v) out[v] = sum[v];
}

// mean[i, c] = sum over the slices of partial[i, slice, c], divided by the pixel count.
template <typename T>
__global__ void finish_mean_kernel(const float* partial, T* mean, int64_t n, int64_t c, int slices, float inv_count) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n * c;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / c, ch = idx % c;
    const float* p = partial + i * slices * c + ch;
    float s = 0.f;
    for (int k = 0; k < slices; ++k) s += p[k * c];
    mean[idx] = kern::from_f<T>(s * inv_count);
  }
}

// Channel groups per block: of 16-32 (fewer where cg is smaller: a warp's loads stay 64-byte
// segments or longer), the count that keeps most threads busy over all slabs, cg * lanes of
// slabs * 128, the larger on a tie. min(cg, 32) left a half-empty last slab: cg = 36
// (EfficientNet's C = 144 at 4 channels) ran 32 + 4 groups, the second slab with 4 of 32 groups
// busy; 18 x 7 lanes keeps 126 of 128 threads busy in both. The partial sums are laid out per
// channel ([n, slices, c]), so the workspace does not depend on the choice.
int channel_groups_per_block(int cg) {
  int best = std::min(cg, 32);
  double best_busy = 0.;
  for (int g = std::min(cg, 32); g >= std::min(cg, 16); --g) {
    const int slabs = (cg + g - 1) / g, lanes = kThreads / g;
    const double busy = double(cg) * lanes / (double(slabs) * kThreads);
    if (busy > best_busy + 1e-9) best = g, best_busy = busy;
  }
  return best;
}

struct Mean {
  MeanGrid grid;
  template <typename T, int VEC, class Tile>
  void run(const Params& p, cudaStream_t s) const {
    MeanGrid m = grid;
    m.cgb = channel_groups_per_block(p.cg);
    m.lanes = kThreads / m.cgb;
    m.slabs = (p.cg + m.cgb - 1) / m.cgb;
    const int64_t blocks = int64_t(m.slabs) * m.slices * p.n;
    dw::with_in_act(p.in_act, [&](auto a) {
      depthwise_mean<T, VEC, Tile, decltype(a)::value><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(p, m);
    });
  }
};

// The fallback: partial sums of an existing y [n, oh * ow, c], a block per (128 channels, slice
// of rows, image), a thread per channel.
template <typename T>
__global__ void spatial_partial(const T* y, int64_t hw, int64_t c, int slabs, int slices, int64_t per_slice,
                                float* partial) {
  int64_t b = blockIdx.x;
  const int slab = static_cast<int>(b % slabs);
  b /= slabs;
  const int slice = static_cast<int>(b % slices);
  const int64_t img = b / slices;
  const int64_t ch = int64_t(slab) * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const int64_t p0 = slice * per_slice, p1 = min(hw, p0 + per_slice);
  float s = 0.f;
  for (int64_t q = p0; q < p1; ++q) s += kern::to_f(y[(img * hw + q) * c + ch]);
  partial[(img * slices + slice) * c + ch] = s;
}

}  // namespace

namespace dw {

Status finish_mean(DType dt, const float* partial, void* mean, int64_t n, int64_t c, int64_t slices, int64_t count,
                   cudaStream_t s) {
  const float inv = 1.f / static_cast<float>(count);
  const unsigned g = kern::grid_for(n * c, 256);
  const int sl = static_cast<int>(slices);
  if (dt == DType::F16)
    finish_mean_kernel<__half><<<g, 256, 0, s>>>(partial, static_cast<__half*>(mean), n, c, sl, inv);
  else
    finish_mean_kernel<__nv_bfloat16><<<g, 256, 0, s>>>(partial, static_cast<__nv_bfloat16*>(mean), n, c, sl, inv);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace dw

size_t depthwise_mean_workspace(int64_t n, int64_t c, int64_t oh) {
  return static_cast<size_t>(n * mean_slices(n, c, oh) * c) * sizeof(float);
}

Status launch_depthwise_nhwc_mean(const DepthwiseArgs& a, void* mean, void* partial, cudaStream_t s) {
  if (a.n == 0 || a.c == 0) return Status::Ok();
  if (a.oh == 0 || a.ow == 0) return Status::Unimplemented("depthwise conv kernel: the mean of an empty output");
  const int64_t slices = mean_slices(a.n, a.c, a.oh);
  const int64_t rows = (a.oh + slices - 1) / slices;
  const int64_t used = (a.oh + rows - 1) / rows;  // slices that hold rows
  if (a.n * used * a.c >= (int64_t{1} << 31))
    return Status::Unimplemented("depthwise conv kernel: {} images x {} channels for the mean", a.n, a.c);
  const Mean launch{MeanGrid{0, static_cast<int>(used), static_cast<int>(rows), 0, 0, static_cast<float*>(partial)}};
  GPUOPT_RETURN_IF_ERROR(dw::dispatch(a, launch, s));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return dw::finish_mean(a.dt, static_cast<const float*>(partial), mean, a.n, a.c, used, a.oh * a.ow, s);
}

Status launch_spatial_mean_nhwc(DType dt, const void* y, int64_t n, int64_t oh, int64_t ow, int64_t c, void* mean,
                                void* partial, cudaStream_t s) {
  if (dt != DType::F16 && dt != DType::BF16) return Status::Unimplemented("spatial mean: dtype {}", dtype_name(dt));
  if (n == 0 || c == 0) return Status::Ok();
  if (oh == 0 || ow == 0) return Status::Unimplemented("spatial mean of an empty tensor");
  const int64_t slices = mean_slices(n, c, oh), hw = oh * ow;
  const int64_t rows = (oh + slices - 1) / slices, used = (oh + rows - 1) / rows, per = rows * ow;
  const int64_t slabs = (c + 127) / 128;
  const unsigned blocks = static_cast<unsigned>(slabs * used * n);
  if (dt == DType::F16)
    spatial_partial<__half><<<blocks, 128, 0, s>>>(static_cast<const __half*>(y), hw, c, static_cast<int>(slabs),
                                                   static_cast<int>(used), per, static_cast<float*>(partial));
  else
    spatial_partial<__nv_bfloat16><<<blocks, 128, 0, s>>>(static_cast<const __nv_bfloat16*>(y), hw, c,
                                                          static_cast<int>(slabs), static_cast<int>(used), per,
                                                          static_cast<float*>(partial));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return dw::finish_mean(dt, static_cast<const float*>(partial), mean, n, c, used, hw, s);
}

}  // namespace gpuopt::cuda
