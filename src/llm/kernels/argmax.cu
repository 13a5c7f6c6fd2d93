// Greedy token selection: argmax_rows, one CTA per row.
#include <climits>

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

// Two passes over the row: the maximum (first index on ties), then, for the logprob, the sum of
// exp(x - max); no exponential in the first pass, 16-byte loads when the row allows.
__global__ void argmax_kernel(const float* __restrict__ logits, int64_t vocab, int64_t ld, int32_t* __restrict__ tokens,
                              float* __restrict__ logprobs) {
  __shared__ float bv_s[32];
  __shared__ int bi_s[32];
  __shared__ float fs[32];
  const float* x = logits + blockIdx.x * ld;
  float bv = -INFINITY;
  int bi = INT_MAX;
  auto take = [&](float v, int i) {
    if (v > bv || (v == bv && i < bi)) {  // NaN compares false: never chosen
      bv = v;
      bi = i;
    }
  };
  const bool vec = (ld % 4 == 0) && aligned16(logits);
  const int64_t nv = vec ? vocab / 4 : 0;
#pragma unroll 8
  for (int64_t k = threadIdx.x; k < nv; k += blockDim.x) {
    const float4 v = reinterpret_cast<const float4*>(x)[k];
    const int i = static_cast<int>(4 * k);
    take(v.x, i);
    take(v.y, i + 1);
    take(v.z, i + 2);
    take(v.w, i + 3);
  }
  for (int64_t i = 4 * nv + threadIdx.x; i < vocab; i += blockDim.x) take(x[i], static_cast<int>(i));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    take(ov, oi);
  }
  if (lane == 0) {
    bv_s[warp] = bv;
    bi_s[warp] = bi;
  }
  __syncthreads();
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) take(bv_s[w], bi_s[w]);
  if (bi == INT_MAX) bi = 0;  // all NaN
  if (logprobs == nullptr) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = bi;
    return;
  }
  const float mx = bv;
  float sum = 0.0f;
#pragma unroll 8
  for (int64_t k = threadIdx.x; k < nv; k += blockDim.x) {
    const float4 v = reinterpret_cast<const float4*>(x)[k];
    sum += (v.x == v.x ? __expf(v.x - mx) : 0.0f) + (v.y == v.y ? __expf(v.y - mx) : 0.0f) +
           (v.z == v.z ? __expf(v.z - mx) : 0.0f) + (v.w == v.w ? __expf(v.w - mx) : 0.0f);
  }
  for (int64_t i = 4 * nv + threadIdx.x; i < vocab; i += blockDim.x) sum += x[i] == x[i] ? __expf(x[i] - mx) : 0.0f;
  sum = block_sum(sum, fs);
  if (threadIdx.x == 0) {
    tokens[blockIdx.x] = bi;
    logprobs[blockIdx.x] = sum > 0.0f ? -__logf(sum) : 0.0f;  // x[bi] == mx
  }
}

}  // namespace

void argmax_rows(const float* logits, int64_t n, int64_t vocab, int64_t ld, int32_t* tokens, float* logprobs,
                 cudaStream_t stream) {
  if (n <= 0) return;
  argmax_kernel<<<static_cast<unsigned>(n), 512, 0, stream>>>(logits, vocab, ld, tokens, logprobs);
}

}  // namespace gpuopt::llm::cuda
