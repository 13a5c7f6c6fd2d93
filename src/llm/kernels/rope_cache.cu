// Rotary embedding (Hugging Face's rotate_half: pairs (i, i + head_dim/2)) of q and k in the fused
// qkv rows, then k and v written into the paged cache at slot_mapping[t] (in the cache's type:
// the compute dtype, or e4m3 codes of the value over the layer's scale).
#include <cuda_fp8.h>

#include <type_traits>

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

// One CTA per (token, group of kHeads heads of the fused row: q heads, then k, then v), so a
// decode step's single token still spreads over many SMs (one CTA per token left a 7B decode step
// with a 12 us kernel on one SM). The cache address of (slot, kv head, d) is
// (slot * KV + kvh) * D + d: slot = block * block_size + offset already linearises
// [num_blocks, block_size].
constexpr int kHeads = 4;
constexpr int kThreads = 128;

// A value as the cache stores it; `inv` (1 / scale) only for e4m3 (satfinite, nearest even).
template <class KT>
__device__ __forceinline__ KT to_cache(float v, float inv) {
  if constexpr (std::is_same_v<KT, __nv_fp8_e4m3>)
    return __nv_fp8_e4m3(v * inv);
  else
    return from_f<KT>(v);
}

template <class T, class KT>
__global__ void __launch_bounds__(kThreads)
    rope_and_cache_kernel(T* __restrict__ qkv, const int32_t* __restrict__ positions,
                          const float* __restrict__ inv_freq, const int32_t* __restrict__ slot_mapping,
                          KT* __restrict__ k_cache, KT* __restrict__ v_cache, int H, int KV, int D, float k_inv,
                          float v_inv) {
  extern __shared__ float cs[];  // cos[D/2], sin[D/2]
  const int64_t t = blockIdx.x;
  const int half = D / 2;
  const int heads = H + 2 * KV;
  const int h0 = blockIdx.y * kHeads;
  const int h1 = min(h0 + kHeads, heads);
  T* row = qkv + t * static_cast<int64_t>(heads) * D;
  const int32_t slot = slot_mapping[t];
  if (h0 < H + KV) {  // uniform over the CTA: it holds q or k heads, which rotate
    const float pos = static_cast<float>(positions[t]);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      float s, c;
      sincosf(pos * inv_freq[i], &s, &c);  // full-range reduction: angles reach 1e5 rad
      cs[i] = c;
      cs[half + i] = s;
    }
    __syncthreads();
  }
  const int pairs = (h1 - h0) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = h0 + p / half, i = p % half;
    T* h = row + static_cast<int64_t>(head) * D;
    if (head < H + KV) {
      const float a = to_f(h[i]), b = to_f(h[i + half]);
      const float c = cs[i], s = cs[half + i];
      const T ra = from_f<T>(a * c - b * s), rb = from_f<T>(b * c + a * s);
      h[i] = ra;
      h[i + half] = rb;
      if (head >= H && slot >= 0) {  // a k head: its rotated values go to the cache too
        KT* kc = k_cache + (static_cast<int64_t>(slot) * KV + (head - H)) * D;
        kc[i] = to_cache<KT>(to_f(ra), k_inv);
        kc[i + half] = to_cache<KT>(to_f(rb), k_inv);
      }
    } else if (slot >= 0) {  // a v head: copied
      KT* vc = v_cache + (static_cast<int64_t>(slot) * KV + (head - H - KV)) * D;
      vc[i] = to_cache<KT>(to_f(h[i]), v_inv);
      vc[i + half] = to_cache<KT>(to_f(h[i + half]), v_inv);
    }
  }
}

}  // namespace

void rope_and_cache(void* qkv, const int32_t* positions, const float* inv_freq, const int32_t* slot_mapping,
                    void* k_cache, void* v_cache, int64_t T, int num_heads, int num_kv_heads, int head_dim,
                    int block_size, DType dt, DType kv_dt, cudaStream_t stream, float k_scale, float v_scale) {
  (void)block_size;  // slot already = block * block_size + offset
  if (T <= 0) return;
  if (head_dim % 2 != 0) contract_violation("rope_and_cache: head_dim must be even");
  if (kv_dt == kKvFp8 && !(k_scale > 0.0f && v_scale > 0.0f)) contract_violation("rope_and_cache: scales must be > 0");
  dispatch_float(dt, [&](auto tag) {
    using T_ = decltype(tag);
    auto launch = [&](auto ktag) {
      using K_ = decltype(ktag);
      const size_t smem = static_cast<size_t>(head_dim) * sizeof(float);
      const dim3 grid(static_cast<unsigned>(T),
                      static_cast<unsigned>((num_heads + 2 * num_kv_heads + kHeads - 1) / kHeads));
      rope_and_cache_kernel<T_, K_><<<grid, kThreads, smem, stream>>>(
          static_cast<T_*>(qkv), positions, inv_freq, slot_mapping, static_cast<K_*>(k_cache),
          static_cast<K_*>(v_cache), num_heads, num_kv_heads, head_dim, 1.0f / k_scale, 1.0f / v_scale);
    };
    if (kv_dt == kKvFp8)
      launch(__nv_fp8_e4m3{});
    else
      dispatch_float(kv_dt, launch);
  });
}

}  // namespace gpuopt::llm::cuda
