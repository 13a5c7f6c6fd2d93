// Rotary embedding (Hugging Face's rotate_half: pairs (i, i + head_dim/2)) of q and k in the fused
// qkv rows, then k and v written into the paged cache at slot_mapping[t].
#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

// One block per token. The cache address of (slot, kv head, d) is (slot * KV + kvh) * D + d:
// slot = block * block_size + offset already linearises [num_blocks, block_size].
template <class T, class KT>
__global__ void rope_and_cache_kernel(T* __restrict__ qkv, const int32_t* __restrict__ positions,
                                      const float* __restrict__ inv_freq, const int32_t* __restrict__ slot_mapping,
                                      KT* __restrict__ k_cache, KT* __restrict__ v_cache, int H, int KV, int D) {
  extern __shared__ float cs[];  // cos[D/2], sin[D/2]
  const int64_t t = blockIdx.x;
  const int half = D / 2;
  T* row = qkv + t * static_cast<int64_t>(H + 2 * KV) * D;
  const float pos = static_cast<float>(positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);  // full-range reduction: angles reach 1e5 rad
    cs[i] = c;
    cs[half + i] = s;
  }
  __syncthreads();
  const int pairs = (H + KV) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = p / half, i = p - head * half;
    T* h = row + static_cast<int64_t>(head) * D;
    const float a = to_f(h[i]), b = to_f(h[i + half]);
    const float c = cs[i], s = cs[half + i];
    h[i] = from_f<T>(a * c - b * s);
    h[i + half] = from_f<T>(b * c + a * s);
  }
  const int32_t slot = slot_mapping[t];
  if (slot < 0) return;
  __syncthreads();  // the rotated k above, written by other threads
  const int kvd = KV * D;
  const T* k = row + static_cast<int64_t>(H) * D;
  const T* v = k + kvd;
  KT* kc = k_cache + static_cast<int64_t>(slot) * kvd;
  KT* vc = v_cache + static_cast<int64_t>(slot) * kvd;
  for (int e = threadIdx.x; e < kvd; e += blockDim.x) {
    kc[e] = from_f<KT>(to_f(k[e]));
    vc[e] = from_f<KT>(to_f(v[e]));
  }
}

}  // namespace

void rope_and_cache(void* qkv, const int32_t* positions, const float* inv_freq, const int32_t* slot_mapping,
                    void* k_cache, void* v_cache, int64_t T, int num_heads, int num_kv_heads, int head_dim,
                    int block_size, DType dt, DType kv_dt, cudaStream_t stream) {
  (void)block_size;  // slot already = block * block_size + offset
  if (T <= 0) return;
  if (head_dim % 2 != 0) contract_violation("rope_and_cache: head_dim must be even");
  dispatch_float(dt, [&](auto tag) {
    using T_ = decltype(tag);
    dispatch_float(kv_dt, [&](auto ktag) {
      using K_ = decltype(ktag);
      const int threads = 256;
      const size_t smem = static_cast<size_t>(head_dim) * sizeof(float);
      rope_and_cache_kernel<T_, K_><<<static_cast<unsigned>(T), threads, smem, stream>>>(
          static_cast<T_*>(qkv), positions, inv_freq, slot_mapping, static_cast<K_*>(k_cache),
          static_cast<K_*>(v_cache), num_heads, num_kv_heads, head_dim);
    });
  });
}

}  // namespace gpuopt::llm::cuda
