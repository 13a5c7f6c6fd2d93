// Depthwise convolution channels-last (NhwcFusedConv with group == C == M: one filter per
// channel) in one kernel of our own, with the conv's epilogue (bias, z, activation) fused.
//
// cuDNN runs these shapes through its grouped-convolution path, which on the H200 was the
// largest cost of EfficientNet-B0, MobileNetV3 and ConvNeXt at large batches (docs/perf-notes.md):
// a depthwise conv does kH*kW multiply-adds per output element, so it is bound by bytes, and a
// direct kernel that reads x once per output row segment and keeps the accumulators in registers
// runs near the memory ceiling. Each thread computes a few adjacent output pixels of up to eight
// adjacent channels (one 8- or 16-byte access), caching the input row segment they share in
// registers (kernel widths 3, 5 and 7, strides 1 and 2); other widths and dilations take a plain
// loop (depthwise_tile.cuh).
// The weights arrive transposed to [kH*kW, C] so each tap is one vector access too.
#pragma once

#include "core/dtype.h"
#include "ops/conv/conv_activation.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// The kernel's tile (kernel widths 3, 5, 7, strides 1 and 2): `narrow` 8 channels x 4 output
// columns per thread at stride 1, x 2 at stride 2; `wide` 4 channels x 8 columns at stride 1, x 4
// at stride 2 (depthwise_tile.cuh: row_owt); `wide1`
// wide at stride 1 and narrow at stride 2 (the choice before stride 2 had the wide tile); kAuto
// is wide. kSmem: the shared-memory kernel (launch_depthwise_smem) where it applies, else kAuto.
// GPUOPT_DEPTHWISE_KERNEL names them: `auto` (the default) and `smem` are kSmem, `tiles` kAuto
// (the register tiles alone), `narrow`, `wide`, `wide1` for A/B runs.
enum class DepthwiseTile : uint8_t { kAuto, kNarrow, kWide, kWideS1, kSmem };

struct DepthwiseArgs {
  DType dt = DType::F16;       // f16 or bf16 (computed in f32, rounded once)
  const void* x = nullptr;     // [n, h, w, c]
  const void* w_t = nullptr;   // [kh * kw, c]: the node's [c, kh, kw, 1] filter transposed
  const void* bias = nullptr;  // [c] or null
  const void* z = nullptr;     // [n, oh, ow, c] or null
  void* y = nullptr;           // [n, oh, ow, c]
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  ConvAct act = ConvAct::kNone;     // the epilogue's, on the output
  ConvAct in_act = ConvAct::kNone;  // the prologue's, on each in-bounds input value (padding stays 0)
  DepthwiseTile tile = DepthwiseTile::kAuto;
};

Status launch_depthwise_nhwc(const DepthwiseArgs& a, cudaStream_t s);

// Squeeze-excitation's spatial mean inside the conv (NhwcFusedConv's second output, se_mean
// pass): the same conv, and mean [n, c] (laid out as [n, 1, 1, c]) of y per image and channel,
// summed in f32 over the values y holds. `partial` is f32 scratch of
// depthwise_mean_workspace(n, c, oh) bytes; the sums are added in a fixed order (no atomics).
size_t depthwise_mean_workspace(int64_t n, int64_t c, int64_t oh);
Status launch_depthwise_nhwc_mean(const DepthwiseArgs& a, void* mean, void* partial, cudaStream_t s);
// The same mean of an existing y [n, oh, ow, c] (f16/bf16): where cuDNN ran the conv.
Status launch_spatial_mean_nhwc(DType dt, const void* y, int64_t n, int64_t oh, int64_t ow, int64_t c, void* mean,
                                void* partial, cudaStream_t s);

// The shared-memory kernel (depthwise_smem.cu): a block copies the input patch of its tile of
// output pixels and channels (halo and padding included) and the slab's weights into shared
// memory once, applying the prologue activation once per element, then computes the tile from
// there; with `mean` (null: the plain conv) it also writes the spatial mean as
// launch_depthwise_nhwc_mean does, from f32 partials [n, tiles, c] in `partial`, of
// depthwise_smem_mean_workspace(a) bytes (a function of the shape only). The same outputs as
// launch_depthwise_nhwc(_mean) to rounding (same tap order; bf16's activated input is rounded to
// bf16). It takes kernel widths 3, 5, 7, heights up to 7, strides 1 and 2, dilation 1, C a
// multiple of 8, x and w_t 16-byte aligned, y, z, bias 8-byte aligned
// (depthwise_smem_applies: all but w_t, which the caller allocates aligned).
bool depthwise_smem_applies(const DepthwiseArgs& a);
size_t depthwise_smem_mean_workspace(const DepthwiseArgs& a);  // 0 where the shape does not apply
Status launch_depthwise_smem(const DepthwiseArgs& a, void* mean, void* partial, cudaStream_t s);

struct ConvKey;
struct CudaKernelContext;

// Whether a channels-last conv is one the kernel takes: group == c == m, f16/bf16, and the
// context's GPUOPT_DEPTHWISE_KERNEL (KernelSettings::depthwise) is not `cudnn` (which keeps
// cuDNN's path, for A/B runs; `narrow`, `wide` and `wide1` pick the kernel's tile, DepthwiseTile;
// `smem` the shared-memory kernel where it applies).
bool depthwise_nhwc_applies(const CudaKernelContext& k, const ConvKey& key);

// Runs it: the filter is transposed into a workspace of the call, then one kernel. With `mean`
// (NhwcFusedConv's second output), the kernel that also writes the spatial mean.
Status run_depthwise_nhwc(CudaKernelContext& k, const ConvKey& key, ConvAct act, const void* x, const void* w,
                          const void* bias, const void* z, void* y, void* mean = nullptr,
                          ConvAct in_act = ConvAct::kNone);
// The spatial mean of a channels-last conv output y that another kernel wrote (cuDNN's path).
Status run_spatial_mean_nhwc(CudaKernelContext& k, const ConvKey& key, const void* y, void* mean);

}  // namespace gpuopt::cuda
