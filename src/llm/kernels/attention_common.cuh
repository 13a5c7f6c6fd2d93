// Shared by the paged-attention kernels (attention.cu: the split-context CUDA-core kernel and its
// reduce; attention_mma.cu: the tensor-core prefill kernel).
#pragma once

#include <type_traits>

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda::detail {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // src-size 0 zero-fills the 16 bytes: masked keys must hold zeros, never stale NaN bits.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Enables more than 48 KB of dynamic shared memory for `kernel` and asks for the largest
// shared-memory carveout (the default split left 2 CTAs per SM where 3 fit), once per
// instantiation.
template <class K>
void allow_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

// mma.sync m16n8k16 (f16/bf16 in, f32 accumulate) and ldmatrix, for the tensor-core paths.
template <class T>
struct Pair;
template <>
struct Pair<__half> {
  using type = __half2;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t* r, const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

template <class T>
__device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The decode kernels' launch parameters and CTA shape (attention.cu, attention_tc.cuh).
constexpr int kWarps = 4;
constexpr int kTile = 32;  // keys per warp tile

struct AttnParams {
  const void* q;
  int64_t q_stride;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_tables;
  int max_blocks_per_seq;
  int num_heads, num_kv_heads, group, group_pow2, block_size;
  float scale_log2;  // scale * log2(e): exp2 throughout (FP8 cache: times k_scale)
  float v_scale;     // the output's factor: an FP8 cache's v_scale, else 1 (attn_kernel only)
  int window;
  int part_size, num_parts;
  float* ws_o;   // [rows, num_heads, num_parts, D] (split only)
  float* ws_ml;  // [rows, num_heads, num_parts, 2]
};

template <class T, int D>
constexpr int row_bytes() {
  return D * static_cast<int>(sizeof(T)) + 16;  // +16: conflict-free 16-byte reads by key
}

using Fp8 = __nv_fp8_e4m3;  // an FP8 cache's elements (kKvFp8)

// The 16/sizeof(KT) cache elements of one 16-byte chunk as floats.
template <class KT>
__device__ __forceinline__ void unpack_kv(const uint4& u, float* f) {
  if constexpr (std::is_same_v<KT, Fp8>) {
    e4m3x4_to_float(u.x, f);
    e4m3x4_to_float(u.y, f + 4);
    e4m3x4_to_float(u.z, f + 8);
    e4m3x4_to_float(u.w, f + 12);
  } else {
    unpack<KT>(u, f);
  }
}

// DPL consecutive elements at p as floats (one 2-, 4-, 8- or 16-byte shared-memory read).
template <class T, int DPL>
__device__ __forceinline__ void load_dims(const T* p, float* f) {
  if constexpr (std::is_same_v<T, Fp8>) {
    static_assert(DPL == 2 || DPL == 4, "head_dim 64 or 128");
    if constexpr (DPL == 4) {
      e4m3x4_to_float(*reinterpret_cast<const uint32_t*>(p), f);
    } else {
      const __half2_raw h =
          __nv_cvt_fp8x2_to_halfraw2(*reinterpret_cast<const __nv_fp8x2_storage_t*>(p), __NV_E4M3);
      const float2 v = __half22float2(__half2(h));
      f[0] = v.x;
      f[1] = v.y;
    }
  } else if constexpr (sizeof(T) * DPL == 16) {
    unpack<T>(*reinterpret_cast<const uint4*>(p), f);
  } else if constexpr (sizeof(T) * DPL == 8) {
    uint2 u = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < DPL; ++i) f[i] = to_f(e[i]);
  } else {
    static_assert(sizeof(T) * DPL == 4, "2 x 16-bit");
    uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < DPL; ++i) f[i] = to_f(e[i]);
  }
}

// The tensor-core prefill kernel (attention_mma.cu): f16/bf16, head_dim 64/128, no split.
void paged_attention_prefill_mma(const PagedAttentionArgs& a, cudaStream_t stream);
bool prefill_mma_available();

}  // namespace gpuopt::llm::cuda::detail
