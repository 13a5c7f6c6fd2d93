// Host-side choice of the elementwise kernels' fast paths (elementwise.cu), kept apart from the
// kernels so a host unit test checks it without a GPU (tests/cuda/elementwise_plan_test.cpp).
//
//   BinaryPlan p = plan_binary(desc, sizeof(__half), sizeof(__half), a, b, y);
//   // p.path == BinaryPath::kVector, p.mode == VecMode::kMidB: a bias [768] over [32,128,768]
//
// Why: the generic kernel spent most of its time in 64-bit `%` and `/` per dimension per
// element (tens of instructions each); memory-bound ops should spend it moving bytes.
#pragma once

#include "backends/cuda/elementwise.h"

#include <cstdint>

#ifdef __CUDACC__
#define GPUOPT_EW_HD __host__ __device__ __forceinline__
#else
#define GPUOPT_EW_HD inline
#endif
// Loops over kMaxRank unrolled on the device, so kernel parameter arrays are indexed by
// constants (a runtime index copies them to local memory).
#ifdef __CUDA_ARCH__
#define GPUOPT_EW_UNROLL _Pragma("unroll")
#else
#define GPUOPT_EW_UNROLL
#endif

namespace gpuopt::cuda {

// Division by a divisor fixed at launch through a multiply-high, an add and a shift (Granlund and
// Montgomery; the form CUTLASS's FastDivmod uses). Exact for dividends below 2^31 and divisors
// 1..2^31; the host computes the magic numbers once per launch.
struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) : divisor(d ? d : 1) {  // 0 never reaches here (empty tensors return early)
    d = divisor;
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  GPUOPT_EW_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, multiplier);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return (hi + n) >> shift;  // hi < n < 2^31: the sum stays in 32 bits
  }
  // n = q * divisor + r
  GPUOPT_EW_HD void divmod(uint32_t n, uint32_t* q, uint32_t* r) const {
    *q = div(n);
    *r = n - *q * divisor;
  }
};

// Largest element count indexed with 32-bit math (FastDivmod's dividend bound).
constexpr int64_t kMax32 = (int64_t{1} << 31) - 1;

// Elements per 16-byte access of an element of `elem_size` bytes, at most 8 (1-byte types take
// 8-byte accesses: 16 unrolled copies of the op switch cost compile time for nothing measurable).
constexpr int vec_width(size_t elem_size) {
  const int v = static_cast<int>(16 / (elem_size ? elem_size : 1));
  return v > 8 ? 8 : (v < 1 ? 1 : v);
}

// True when `p` is aligned to `bytes`.
inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

enum class BinaryPath : uint8_t {
  kVector,     // contiguous output, V elements per access (mode below)
  kGeneral32,  // any broadcast, collapsed dims, 32-bit index math by FastDivmod
  kGeneral64,  // tensors of 2^31 elements or more: the original 64-bit kernel
};

enum class VecMode : uint8_t {
  kSame,       // a and b have the output's shape
  kScalarA,    // a is one element
  kScalarB,    // b is one element
  kMidA,       // b full; a indexed by (i / inner) % mid: a row [C] over [..., C] (inner 1),
  kMidB,       //   a column [N, 1] over [N, C] (mid N), a channel [C, 1, 1] over [N, C, H, W]
  kBroadcast,  // any broadcast whose innermost collapsed axis is whole vectors (BERT's mask
               // [B,1,1,S] over [B,H,S,S]): offsets once per vector; each operand loads a
               // vector (innermost stride 1) or one element (stride 0)
};

// The output's broadcast with size-1 axes dropped and neighbours merged where both operands
// walk them the same way (both broadcast, or both contiguous across the pair).
struct CollapsedBroadcast {
  int rank = 0;
  int64_t numel = 1;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
CollapsedBroadcast collapse_broadcast(const BroadcastDesc& d);

struct BinaryPlan {
  BinaryPath path = BinaryPath::kGeneral64;
  VecMode mode = VecMode::kSame;
  int vec = 1;        // kVector: elements per access
  int64_t inner = 1;  // kMid*: the small operand's element of output i is (i / inner) % mid
  int64_t mid = 1;
  bool small_vector = false;  // kMid* with inner 1: the small operand's V elements are contiguous
  bool a_vector = false;      // kBroadcast: a's innermost collapsed stride is 1 (else 0)
  bool b_vector = false;
  CollapsedBroadcast shape;  // kGeneral32, kBroadcast
  const char* why = "";      // the reason for the path, for tests and logs
};

// kGeneral32's index math: the collapsed axes innermost first, 32-bit strides.
struct Index32 {
  int rank = 0;
  FastDivmod dims[kMaxRank];
  uint32_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
};
Index32 make_index32(const CollapsedBroadcast& c);  // c.numel <= kMax32

// Offsets in a and b of output element i.
GPUOPT_EW_HD void index32_offsets(const Index32& g, uint32_t i, uint32_t* ia, uint32_t* ib) {
  uint32_t rem = i, oa = 0, ob = 0;
  GPUOPT_EW_UNROLL
  for (int k = 0; k < kMaxRank; ++k) {
    if (k >= g.rank) break;
    uint32_t c = rem;  // the outermost axis takes what is left, no division
    if (k < g.rank - 1) g.dims[k].divmod(rem, &rem, &c);
    oa += c * g.sa[k];
    ob += c * g.sb[k];
  }
  *ia = oa;
  *ib = ob;
}

// kMid*: the small operand's element for output element i, (i / inner) % mid.
GPUOPT_EW_HD uint32_t mid_index(const FastDivmod& inner, const FastDivmod& mid, uint32_t i) {
  const uint32_t q = inner.div(i);
  return q - mid.div(q) * mid.divisor;
}

// Chooses the path for one call; `in_size` and `out_size` are the element sizes of a/b and y.
BinaryPlan plan_binary(const BroadcastDesc& d, size_t in_size, size_t out_size, const void* a, const void* b,
                       const void* y);

}  // namespace gpuopt::cuda
