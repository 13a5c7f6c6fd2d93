// launch_depthwise_smem (depthwise.h): the depthwise channels-last conv, with or without
// squeeze-excitation's spatial mean, through shared memory (the default; GPUOPT_DEPTHWISE_KERNEL=tiles keeps the register tiles).
//
// Why: the register tiles (depthwise.cu, depthwise_mean.cu) read each input value from global
// memory once per output row that uses it (kh / sh times) and apply the prologue activation as
// often; at 126-128 registers they ran 4 blocks of 128 threads per SM (25% occupancy), and on
// the H200 (EfficientNet-B0 fp16, b256) at 0.4-0.8 of its 4 TB/s.
//
// Block = (image, tile of th x tw output pixels, slab of cs channels), 256 threads:
//  1. the input patch the tile reads, ((th-1)*sh + kh) x ((tw-1)*sw + kw) pixels x cs channels
//     (padding written as 0), and the slab's weights go to shared memory with 16-byte cp.async,
//     all of the block's copies in flight at once; each thread then applies the prologue
//     activation in place to the chunks it copied: once per element and block, in f32 (Swish
//     exactly, not through tanh.approx as the register tiles do), rounded to T (the unfused
//     graph's value). Padding stays 0: every prologue activation maps 0 to 0.
//  2. thread (group gi of 4 channels, lane) computes positions lane, lane + lanes, ... of the
//     tile, each 4 adjacent output columns of one row, in f32 with the taps in the register
//     tiles' order (ky outer, kx inner; a padded tap adds 0 * w where they skip it), one kernel
//     row's weights in registers; dw::finish adds bias and z, activates and stores.
//  3. with the mean: each thread sums what it stored, the lanes' sums meet in shared memory, lane
//     0 adds them in lane order and writes one f32 partial per (image, tile, channel);
//     dw::finish_mean adds the tiles' partials in order. No atomics: the same result every run.
// Consecutive threads take consecutive channel groups, then consecutive rows (lanes): the
// patch's row pitch is padded to iw * cs + pad = cs (mod 64 elements), so a warp's 8-byte reads
// of one column in successive rows fall on successive banks as if the rows were one pixel.
// Applies to kernel widths 3, 5, 7 (heights 1-7), strides 1 and 2, dilation 1, C a multiple of 8
// with 16-byte aligned x and filter; other shapes keep the register tiles.
#include "ops/conv/cuda/depthwise_tile.cuh"
#include "core/cuda_check.h"

#include <algorithm>
#include <limits>

namespace gpuopt::cuda {
namespace {

using dw::Params;

constexpr int kThreads = 256;
constexpr int kMinBlocks = 4;  // per SM (launch bounds): <= 64 registers, 1024 threads, 50% occupancy
constexpr int kVec = 4;        // channels per thread access: 8 bytes
constexpr int kOwt = 4;        // output columns per position
constexpr int kChunk = 8;      // elements per 16-byte copy
constexpr int kSmemMax = 48 * 1024;     // 4 blocks: 192 KB of the H200's 228 KB per SM
constexpr int kRedBytes = kVec * kThreads * 4;  // the mean's per-thread sums, over the patch

struct Grid {
  int cs;          // channels per slab: a multiple of 8 dividing c
  int th, tw;      // output rows and columns per tile (tw a multiple of kOwt)
  int ih, iw;      // input patch rows and columns
  int pitch;       // elements per patch row: iw * cs + pad
  int w_off;       // element offset of the weights [kh * kw, cs] in shared memory
  int slabs, tiles_x, tiles_y;
  int groups, lanes;  // cs / kVec channel groups; lanes per group: kThreads / groups
  float* partial;     // [n, tiles_y * tiles_x, c] or null: no mean
};

// 16 bytes global -> shared without a register round trip (sm_80+), so a thread has all of its
// copies in flight; a plain copy before sm_80.
__device__ __forceinline__ void copy16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#else
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}

__device__ __forceinline__ void copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

// The prologue activation in f32, Swish as x / (1 + e^-x) rather than the register tiles'
// tanh.approx (whose error, about 2^-11, put two backend-ops cases over the f16 tolerance on the
// H200). The division is __fdividef (two special-function instructions, a few f32 ulp before the
// f16 rounding): the IEEE division's slow path cost about 1.5 ms at EfficientNet-B0 b256. For
// x < -87, e^-x is inf and x / inf gives -0, Swish's limit.
template <ConvAct A>
__device__ __forceinline__ float act_f32(float x) {
  if constexpr (A == ConvAct::kSwish) return __fdividef(x, 1.f + __expf(-x));
  return dw::in_act<A>(x);  // HardSwish, Relu: exact arithmetic already
}

// The prologue activation A on 8 elements in shared memory, in f32 and rounded back to T once
// (the value the unfused graph's activation would have stored).
template <typename T, ConvAct A>
__device__ __forceinline__ void act_chunk(T* s) {
  uint4 u = *reinterpret_cast<const uint4*>(s);
  T* e = reinterpret_cast<T*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = kern::from_f<T>(act_f32<A>(kern::to_f(e[i])));
  *reinterpret_cast<uint4*>(s) = u;
}

template <typename T, int KW, int SW, ConvAct A>
__global__ void __launch_bounds__(kThreads, kMinBlocks) depthwise_smem(Params p, Grid g) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* patch = reinterpret_cast<T*>(smem);
  int64_t b = blockIdx.x;
  const int slab = static_cast<int>(b % g.slabs);
  b /= g.slabs;
  const int tx = static_cast<int>(b % g.tiles_x);
  b /= g.tiles_x;
  const int ty = static_cast<int>(b % g.tiles_y);
  const int64_t img = b / g.tiles_y;
  const int cb = slab * g.cs;                  // the slab's first channel
  const int oy0 = ty * g.th, ox0 = tx * g.tw;  // the tile's first output pixel
  const int iy0 = oy0 * p.sh - p.ph, ix0 = ox0 * SW - p.pw;

  // 1. Copy i is chunk k of patch pixel (row, col), at element 8 i + row * pad of the patch.
  const int cpp = g.cs / kChunk, row_copies = g.iw * cpp, pad = g.pitch - g.iw * g.cs;
  const int copies = g.ih * row_copies;
  const T* x = static_cast<const T*>(p.x) + img * p.h * int64_t(p.w_) * p.c + cb;
  for (int i = threadIdx.x; i < copies; i += kThreads) {
    const int row = i / row_copies, rem = i - row * row_copies, col = rem / cpp, k = rem - col * cpp;
    const int iy = iy0 + row, ix = ix0 + col;
    T* dst = patch + i * kChunk + row * pad;
    if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w_)
      copy16(dst, x + (int64_t(iy) * p.w_ + ix) * p.c + k * kChunk);
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
  const T* wsrc = static_cast<const T*>(p.w) + cb;
  for (int i = threadIdx.x; i < p.kh * KW * cpp; i += kThreads) {
    const int tap = i / cpp, k = i - tap * cpp;
    copy16(patch + g.w_off + i * kChunk, wsrc + int64_t(tap) * p.c + k * kChunk);
  }
  copy_wait();
  if constexpr (A != ConvAct::kNone) {  // this thread's own copies: no barrier needed before
    for (int i = threadIdx.x; i < copies; i += kThreads) act_chunk<T, A>(patch + i * kChunk + (i / row_copies) * pad);
  }
  __syncthreads();

  // 2. Positions (ly, sx): output row oy0 + ly, columns ox0 + 4 sx .. + 3.
  constexpr int COLS = (kOwt - 1) * SW + KW;
  const int gi = threadIdx.x % g.groups, lane = threadIdx.x / g.groups;
  const int c0 = cb + gi * kVec;
  float sum[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) sum[v] = 0.f;
  if (lane < g.lanes) {
    const int positions = g.th * (g.tw / kOwt);
    const T* wts = patch + g.w_off + gi * kVec;
    for (int pos = lane; pos < positions; pos += g.lanes) {
      const int ly = pos % g.th, sx = pos / g.th;
      const int oy = oy0 + ly, ox = ox0 + sx * kOwt;
      if (oy >= p.oh || ox >= p.ow) continue;
      float acc[kOwt][kVec];
#pragma unroll
      for (int t = 0; t < kOwt; ++t)
#pragma unroll
        for (int v = 0; v < kVec; ++v) acc[t][v] = 0.f;
      const T* in = patch + ly * p.sh * g.pitch + sx * kOwt * SW * g.cs + gi * kVec;
      const T* wk = wts;
      for (int ky = 0; ky < p.kh; ++ky, in += g.pitch, wk += KW * g.cs) {
        float wr[KW][kVec];
#pragma unroll
        for (int kx = 0; kx < KW; ++kx) dw::load<T, kVec>(wk + kx * g.cs, wr[kx]);
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
          float xv[kVec];
          dw::load<T, kVec>(in + j * g.cs, xv);
#pragma unroll
          for (int t = 0; t < kOwt; ++t) {
            const int kx = j - t * SW;  // increasing in j: kx inner, as the register tiles
            if (kx >= 0 && kx < KW) {
#pragma unroll
              for (int v = 0; v < kVec; ++v) acc[t][v] = fmaf(xv[v], wr[kx][v], acc[t][v]);
            }
          }
        }
      }
      dw::finish_sum<T, kVec, kOwt>(p, acc, (img * p.oh + oy) * p.ow + ox, ox, c0, sum);
    }
  }
  if (!g.partial) return;

  // 3. The lanes' sums, over the patch (read by now).
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int v = 0; v < kVec; ++v) red[v * kThreads + threadIdx.x] = sum[v];
  __syncthreads();
  if (lane != 0) return;
  for (int l = 1; l < g.lanes; ++l)
#pragma unroll
    for (int v = 0; v < kVec; ++v) sum[v] += red[v * kThreads + l * g.groups + gi];
  float* out = g.partial + ((img * g.tiles_y + ty) * g.tiles_x + tx) * p.c + c0;
#pragma unroll
  for (int v = 0; v < kVec; ++v) out[v] = sum[v];
}

bool aligned(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// Whether the shape is one the kernel takes (pointers aside).
bool shape_applies(const DepthwiseArgs& a) {
  if (a.dt != DType::F16 && a.dt != DType::BF16) return false;
  const int64_t lim = int64_t{1} << 30;
  for (int64_t v : {a.n, a.h, a.w, a.c, a.oh, a.ow, a.h * a.w, a.oh * a.ow})
    if (v <= 0 || v >= lim) return false;
  return (a.kw == 3 || a.kw == 5 || a.kw == 7) && a.kh >= 1 && a.kh <= 7 && (a.sw == 1 || a.sw == 2) &&
         (a.sh == 1 || a.sh == 2) && a.dh == 1 && a.dw == 1 && a.ph >= 0 && a.pw >= 0 && a.c % kChunk == 0;
}

// The patch's bytes for a tile, its pitch and weight offset set in g.
size_t patch_bytes(const DepthwiseArgs& a, Grid& g, bool mean) {
  g.ih = static_cast<int>((g.th - 1) * a.sh + a.kh);
  g.iw = static_cast<int>((g.tw - 1) * a.sw + a.kw);
  const int row = g.iw * g.cs;
  g.pitch = row + ((g.cs - row) % 64 + 64) % 64;  // = cs (mod 64); both multiples of 8: rows stay 16-byte aligned
  g.w_off = g.ih * g.pitch;
  const size_t bytes = (size_t(g.w_off) + size_t(a.kh * a.kw * g.cs)) * 2;
  return mean ? std::max<size_t>(bytes, kRedBytes) : bytes;
}

// The tiling of a shape: a function of the shape only (the mean's workspace depends on it).
// Over slabs (cs dividing c, up to 256 channels) and tile extents that fit kSmemMax, the least
// estimated cost in elements moved: per block the patch (halo included; each element copied,
// activated and read back; 8 more per pixel for the partly used 32-byte sectors at the ends of
// a pixel's slab, which make narrow slabs dear), the thread slots of its positions (idle lanes and the last round's
// idle threads included: half an element per output slot) and a fixed 1024 for its start and
// barriers, times the blocks, at least 528 (4 per SM of the H200's 132) so that a tiling that
// leaves SMs idle pays for them.
Grid tiling(const DepthwiseArgs& a, bool mean, size_t* smem) {
  const int64_t strips = (a.ow + kOwt - 1) / kOwt;
  double best = std::numeric_limits<double>::infinity();
  Grid out{};
  for (int cs = kChunk; cs <= std::min<int64_t>(a.c, 256); cs += kChunk) {
    if (a.c % cs) continue;
    Grid g{};
    g.cs = cs;
    g.groups = cs / kVec;
    g.lanes = kThreads / g.groups;
    g.slabs = static_cast<int>(a.c / cs);
    int64_t last_sx = 0;
    for (int64_t nx = strips; nx >= 1; --nx) {  // tiles across: each distinct tile width once
      const int64_t sx = (strips + nx - 1) / nx;
      if (sx == last_sx) continue;
      last_sx = sx;
      g.tw = static_cast<int>(sx * kOwt);
      g.tiles_x = static_cast<int>((strips + sx - 1) / sx);
      int64_t last_th = 0;
      for (int64_t ny = a.oh; ny >= 1; --ny) {
        const int64_t th = (a.oh + ny - 1) / ny;
        if (th == last_th) continue;
        last_th = th;
        g.th = static_cast<int>(th);
        g.tiles_y = static_cast<int>((a.oh + th - 1) / th);
        const size_t bytes = patch_bytes(a, g, mean);
        if (bytes > kSmemMax) break;  // taller tiles only grow
        const int64_t positions = th * sx, rounds = (positions + g.lanes - 1) / g.lanes;
        const int64_t blocks = a.n * g.slabs * g.tiles_x * g.tiles_y;
        const double per_block = double(g.ih) * g.iw * (cs + 8) + double(rounds) * kThreads * kOwt * kVec + 1024.0;
        const double cost = double(std::max<int64_t>(blocks, 528)) * per_block;
        if (cost < best) {
          best = cost;
          out = g;
          *smem = bytes;
        }
      }
    }
  }
  return out;
}

template <typename T, int KW, int SW>
void launch(const Params& p, const Grid& g, size_t smem, unsigned blocks, cudaStream_t s) {
  dw::with_in_act(p.in_act, [&](auto a) {
    depthwise_smem<T, KW, SW, decltype(a)::value><<<blocks, kThreads, smem, s>>>(p, g);
  });
}

template <typename T>
void launch_type(const Params& p, const Grid& g, size_t smem, unsigned blocks, cudaStream_t s) {
  auto by_stride = [&](auto kw) {
    if (p.sw == 1) return launch<T, decltype(kw)::value, 1>(p, g, smem, blocks, s);
    launch<T, decltype(kw)::value, 2>(p, g, smem, blocks, s);
  };
  if (p.kw == 3) return by_stride(std::integral_constant<int, 3>{});
  if (p.kw == 5) return by_stride(std::integral_constant<int, 5>{});
  by_stride(std::integral_constant<int, 7>{});
}

}  // namespace

bool depthwise_smem_applies(const DepthwiseArgs& a) {
  return shape_applies(a) && aligned(a.x, 16) && aligned(a.y, 8) && (!a.bias || aligned(a.bias, 8)) &&
         (!a.z || aligned(a.z, 8));
}

size_t depthwise_smem_mean_workspace(const DepthwiseArgs& a) {
  if (!shape_applies(a)) return 0;
  size_t smem = 0;
  const Grid g = tiling(a, true, &smem);
  return static_cast<size_t>(a.n * g.tiles_y * g.tiles_x * a.c) * sizeof(float);
}

Status launch_depthwise_smem(const DepthwiseArgs& a, void* mean, void* partial, cudaStream_t s) {
  if (!depthwise_smem_applies(a) || !aligned(a.w_t, 16))
    return Status::Unimplemented("depthwise smem kernel: shape or alignment it does not take");
  size_t smem = 0;
  Grid g = tiling(a, mean != nullptr, &smem);
  if (g.cs == 0) return Status::Unimplemented("depthwise smem kernel: no tile fits {} bytes", kSmemMax);
  const int64_t blocks = a.n * g.slabs * g.tiles_x * g.tiles_y;
  if (blocks >= (int64_t{1} << 31))
    return Status::Unimplemented("depthwise smem kernel: {} blocks", blocks);
  g.partial = static_cast<float*>(mean ? partial : nullptr);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const Params p{a.x,     a.w_t,   a.bias,  a.z,     a.y,     i(a.n),  i(a.h),  i(a.w),  i(a.c), i(a.oh),
                 i(a.ow), i(a.kh), i(a.kw), i(a.sh), i(a.sw), i(a.ph), i(a.pw), i(a.dh), i(a.dw), i(a.c / kVec),
                 0,       a.act,   a.in_act};
  if (a.dt == DType::F16)
    launch_type<__half>(p, g, smem, static_cast<unsigned>(blocks), s);
  else
    launch_type<__nv_bfloat16>(p, g, smem, static_cast<unsigned>(blocks), s);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  if (!mean) return Status::Ok();
  return dw::finish_mean(a.dt, g.partial, mean, a.n, a.c, int64_t(g.tiles_y) * g.tiles_x, a.oh * a.ow, s);
}

}  // namespace gpuopt::cuda
