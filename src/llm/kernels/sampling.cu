// Token selection on the GPU: sample_rows (penalties, temperature, top-k, top-p, min-p, one
// Philox draw), one CTA per row (argmax_rows: argmax.cu). sample_rows never sorts: each cut is a
// position in the order (value desc, id asc), found by a radix descent (a level of
// distance-below-max bins, then 11 + 11 + 10 bits of the order-preserving float key) over
// histograms of counts and softmax mass in shared memory; ties at a cut are resolved by id in one
// last pass.
#include <climits>

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"
#include "llm/kernels/philox.h"
#include "llm/kernels/reduce.cuh"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 1024;
constexpr int kBins = 2048;
constexpr int kCand = 2048;

// ---- sample_rows ----
struct Row {
  const float* x;
  const int32_t* cnt;
  const uint8_t* pm;
  SampleRowParams sp;
  bool greedy, penal;
};

// The processed logit of token i: penalties, then / temperature (not for greedy). NaN -> -inf.
__device__ __forceinline__ float zval_from(const Row& r, int64_t i, float l) {
  if (r.penal) {
    const int c = r.cnt ? r.cnt[i] : 0;
    const bool seen = c > 0 || (r.pm && r.pm[i]);
    // Explicit roundings (no FMA contraction): the CPU sampler computes the same f32 values.
    if (seen && r.sp.repetition_penalty != 1.0f)
      l = l > 0.0f ? __fdiv_rn(l, r.sp.repetition_penalty) : __fmul_rn(l, r.sp.repetition_penalty);
    l = __fsub_rn(
        l, __fadd_rn(c > 0 ? r.sp.presence_penalty : 0.0f, __fmul_rn(r.sp.frequency_penalty, static_cast<float>(c))));
  }
  if (!r.greedy) l = __fdiv_rn(l, r.sp.temperature);
  return l != l ? -INFINITY : l;
}
__device__ __forceinline__ float zval(const Row& r, int64_t i) {
  return zval_from(r, i, r.x[i]);
}

// Calls f(z, i) for this thread's share of the vocabulary, kUnroll loads in flight at a time (one
// CTA per row: a single load per iteration left each pass latency-bound).
constexpr int kUnroll = 8;
template <class F>
__device__ __forceinline__ void for_each_z(const Row& r, int64_t vocab, F&& f) {
  const int64_t step = blockDim.x;
  for (int64_t base = threadIdx.x; base < vocab; base += step * kUnroll) {
    float z[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * step;
      z[u] = i < vocab ? zval(r, i) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * step;
      if (i < vocab) f(z[u], i);
    }
  }
}

// The tokens a pass visits: the whole row, or the candidates gathered into shared memory.
struct VocabSrc {
  const Row& r;
  int64_t vocab;
  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
    for_each_z(r, vocab, f);
  }
};
struct CandSrc {
  const float* z;
  const int* id;
  int n;
  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
    for (int k = threadIdx.x; k < n; k += blockDim.x) f(z[k], static_cast<int64_t>(id[k]));
  }
};

struct Smem {
  int cnt[kBins];
  float mass[kBins];
  int id[kBins];
  int wc[32];
  float wm[32];
  int best, last;
  int sel_cnt_gt, sel_cnt_eq;
  float sel_mass_gt, sel_mass_eq;
  uint32_t prefix;
  int sel_id;
  MaxSum ms[32];
  float fs[32];
  uint32_t kmin;
  int ncand;
  float cz[kCand];  // candidates: every token at or above the current cut (when few enough)
  int cid[kCand];
};

// A cut in the sorted order: every token with key > key, plus the first `ties` of those equal.
struct Cut {
  uint32_t key;
  int cnt_gt;     // tokens with a greater key
  float mass_gt;  // their mass
  int cnt_eq;     // tokens with this key
  float mass_eq;
  int id_if_one;  // the token when cnt_eq == 1
};

// Radix descent: the position where the cumulative count (kCount) or mass reaches `need`
// (kStrict: exceeds it). Scans the vocabulary three times.
// Level 0 of a descent bins by distance below the maximum in 1/64 steps (logits bunch into a
// few exponents, so bins of the raw float bits would make every atomic hit the same few
// counters); bin 0 is the far tail (>= ~32 below), counted per thread and added once.
__device__ __forceinline__ int dist_bin(float z, float zmax) {
  const float d = zmax - z;
  if (!(d < 31.9f)) return 0;
  return kBins - 1 - static_cast<int>(d * 64.0f);
}

// Radix descent: the position where the cumulative count (kCount) or mass reaches `need`
// (kStrict: exceeds it), among the tokens with key >= floor_key (the ones below cannot come
// before the position sought). Level 0 by distance bins, then 11 + 11 + 10 bits of the key
// within the chosen bin: four scans of the vocabulary.
template <bool kCount, bool kStrict, class Src>
__device__ Cut descend(const Src& src, float zmax, float need, uint32_t floor_key, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t prefix = 0, pmask = 0;
  int gt_cnt = 0, bin0 = -1;
  float gt_mass = 0.0f;
  Cut cut{};
  for (int level = 0; level < 4; ++level) {
    const int shift = level == 1 ? 21 : level == 2 ? 10 : 0;
    const int nb = level == 3 ? 1024 : 2048;
    for (int b = tid; b < kBins; b += blockDim.x) {
      sm.cnt[b] = 0;
      sm.mass[b] = 0.0f;
    }
    if (tid == 0) {
      sm.best = INT_MAX;
      sm.last = -1;
    }
    __syncthreads();
    int tail_c = 0;
    float tail_m = 0.0f;
    src.each([&](float z, int64_t i) {
      const uint32_t u = order_key(z);
      if (u < floor_key) return;
      const int b0 = dist_bin(z, zmax);
      int b;
      if (level == 0) {
        if (b0 == 0) {
          ++tail_c;
          tail_m += __expf(z - zmax);
          return;
        }
        b = b0;
      } else {
        if (b0 != bin0 || (u & pmask) != prefix) return;
        b = static_cast<int>((u >> shift) & static_cast<uint32_t>(nb - 1));
      }
      atomicAdd(&sm.cnt[b], 1);
      atomicAdd(&sm.mass[b], __expf(z - zmax));
      if (level == 3) sm.id[b] = static_cast<int>(i);
    });
    if (level == 0) {
      tail_c = __reduce_add_sync(0xffffffffu, tail_c);
      tail_m = warp_sum(tail_m);
      if (lane == 0 && tail_c > 0) {
        atomicAdd(&sm.cnt[0], tail_c);
        atomicAdd(&sm.mass[0], tail_m);
      }
    }
    __syncthreads();
    // Suffix sums over bins (from the top): thread tid owns reversed positions 2tid, 2tid+1.
    const int r0 = 2 * tid, r1 = r0 + 1;
    const int c0 = r0 < nb ? sm.cnt[nb - 1 - r0] : 0, c1 = r1 < nb ? sm.cnt[nb - 1 - r1] : 0;
    const float m0 = r0 < nb ? sm.mass[nb - 1 - r0] : 0.0f, m1 = r1 < nb ? sm.mass[nb - 1 - r1] : 0.0f;
    int cs = c0 + c1;
    float msum = m0 + m1;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int oc = __shfl_up_sync(0xffffffffu, cs, o);
      const float om = __shfl_up_sync(0xffffffffu, msum, o);
      if (lane >= o) {
        cs += oc;
        msum += om;
      }
    }
    if (lane == 31) {
      sm.wc[warp] = cs;
      sm.wm[warp] = msum;
    }
    __syncthreads();
    if (warp == 0) {
      int wc = lane < static_cast<int>(blockDim.x >> 5) ? sm.wc[lane] : 0;
      float wm = lane < static_cast<int>(blockDim.x >> 5) ? sm.wm[lane] : 0.0f;
      const int wc0 = wc;
      const float wm0 = wm;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int oc = __shfl_up_sync(0xffffffffu, wc, o);
        const float om = __shfl_up_sync(0xffffffffu, wm, o);
        if (lane >= o) {
          wc += oc;
          wm += om;
        }
      }
      sm.wc[lane] = wc - wc0;  // exclusive
      sm.wm[lane] = wm - wm0;
    }
    __syncthreads();
    const int base_c = sm.wc[warp] + cs - (c0 + c1);
    const float base_m = sm.wm[warp] + msum - (m0 + m1);
    const int inc_c[2] = {base_c + c0, base_c + c0 + c1};
    const float inc_m[2] = {base_m + m0, base_m + m0 + m1};
    const int cc[2] = {c0, c1};
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int rr = r0 + k;
      if (rr >= nb || cc[k] == 0) continue;
      bool hit;
      if (kCount)
        hit = static_cast<float>(gt_cnt + inc_c[k]) >= need;
      else if (kStrict)
        hit = gt_mass + inc_m[k] > need;
      else
        hit = gt_mass + inc_m[k] >= need;
      if (hit) atomicMin(&sm.best, rr);
      atomicMax(&sm.last, rr);  // rounding fallback: the lowest non-empty bin
    }
    __syncthreads();
    const int chosen = sm.best != INT_MAX ? sm.best : sm.last;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (r0 + k != chosen) continue;
      const float mk = k == 0 ? m0 : m1;
      sm.sel_cnt_gt = inc_c[k] - cc[k];
      sm.sel_mass_gt = inc_m[k] - mk;
      sm.sel_cnt_eq = cc[k];
      sm.sel_mass_eq = mk;
    }
    __syncthreads();
    const int bin = nb - 1 - chosen;
    gt_cnt += sm.sel_cnt_gt;
    gt_mass += sm.sel_mass_gt;
    if (level == 0) {
      bin0 = bin;
    } else {
      prefix |= static_cast<uint32_t>(bin) << shift;
      pmask |= static_cast<uint32_t>(nb - 1) << shift;
    }
    if (level == 3) {
      cut.key = prefix;
      cut.cnt_gt = gt_cnt;
      cut.mass_gt = gt_mass;
      cut.cnt_eq = sm.sel_cnt_eq;
      cut.mass_eq = sm.sel_mass_eq;
      cut.id_if_one = sm.id[bin];
    }
    __syncthreads();  // sm.sel_* and the histograms are rewritten next level
  }
  return cut;
}

// The j-th (1-based) lowest id with key `key`; the last such id when fewer than j exist.
__device__ int jth_id(const Row& r, int64_t vocab, uint32_t key, int j, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int seen = 0, last = -1;
  for (int64_t c0 = 0; c0 < vocab; c0 += blockDim.x) {
    const int64_t i = c0 + tid;
    const int f = (i < vocab && order_key(zval(r, i)) == key) ? 1 : 0;
    int incl = f;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    __syncthreads();
    if (lane == 31) sm.wc[warp] = incl;
    if (tid == 0) {
      sm.sel_id = -1;
      sm.last = -1;
    }
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
      if (w < warp) before += sm.wc[w];
      total += sm.wc[w];
    }
    const int rank = seen + before + incl;
    if (f && rank == j) sm.sel_id = static_cast<int>(i);
    if (f) atomicMax(&sm.last, static_cast<int>(i));
    __syncthreads();
    if (sm.sel_id >= 0) return sm.sel_id;
    if (sm.last >= 0) last = sm.last;
    seen += total;
  }
  return last >= 0 ? last : 0;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int64_t vocab, int64_t ld,
                  const SampleRowParams* __restrict__ params, const int32_t* __restrict__ counts,
                  const uint8_t* __restrict__ prompt_mask, int32_t* __restrict__ tokens, float* __restrict__ logprobs) {
  __shared__ Smem sm;
  const int64_t row = blockIdx.x;
  Row r;
  r.x = logits + row * ld;
  r.sp = params[row];
  r.cnt = counts ? counts + row * vocab : nullptr;
  r.pm = prompt_mask ? prompt_mask + row * vocab : nullptr;
  r.penal = (r.cnt || r.pm) &&
            (r.sp.repetition_penalty != 1.0f || r.sp.presence_penalty != 0.0f || r.sp.frequency_penalty != 0.0f);
  r.greedy = !(r.sp.temperature > 0.0f);

  // Pass 0: max and sum of exp of the processed logits; of the raw ones for the logprob.
  MaxSum z{-INFINITY, 0.0f}, raw{-INFINITY, 0.0f};
  for (int64_t base = threadIdx.x; base < vocab; base += static_cast<int64_t>(blockDim.x) * kUnroll) {
    float xs[kUnroll], zs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
      xs[u] = i < vocab ? r.x[i] : -INFINITY;
    }
    float bz = -INFINITY, bx = -INFINITY;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
      zs[u] = i < vocab ? zval_from(r, i, xs[u]) : -INFINITY;
      if (xs[u] != xs[u]) xs[u] = -INFINITY;  // NaN logits carry no mass
      bz = fmaxf(bz, zs[u]);
      bx = fmaxf(bx, xs[u]);
    }
    // One rescale per batch instead of per element.
    MaxSum bzs{bz, 0.0f}, bxs{bx, 0.0f};
    if (bz != -INFINITY)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) bzs.s += __expf(zs[u] - bz);
    if (bx != -INFINITY)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) bxs.s += __expf(xs[u] - bx);
    z = merge(z, bzs);
    raw = merge(raw, bxs);
  }
  z = block_maxsum(z, sm.ms);
  raw = block_maxsum(raw, sm.ms);
  const float zmax = z.m == -INFINITY ? 0.0f : z.m;
  uint32_t key;
  int j, only = -1;  // only: the token when its key is unique
  const VocabSrc all{r, vocab};
  if (r.greedy) {
    const Cut c = descend<true, false>(all, zmax, 1.0f, 0u, sm);
    key = c.key;
    j = 1;
    if (c.cnt_eq == 1) only = c.id_if_one;
  } else {
    // The kept prefix: keys above kkey plus the first kties of kkey (INT_MAX: all of them).
    uint32_t kkey = 0;
    int kties = INT_MAX;
    float kmass = z.s;
    // Once a cut leaves at most kCand tokens at or above it, they move to shared memory and the
    // later passes visit only them.
    bool cand = false;
    auto gather = [&](const Cut& c) {
      if (c.cnt_gt + c.cnt_eq > kCand) return;
      if (threadIdx.x == 0) sm.ncand = 0;
      __syncthreads();
      for_each_z(r, vocab, [&](float zi, int64_t i) {
        if (order_key(zi) < kkey) return;
        const int k = atomicAdd(&sm.ncand, 1);
        if (k < kCand) {
          sm.cz[k] = zi;
          sm.cid[k] = static_cast<int>(i);
        }
      });
      __syncthreads();
      cand = sm.ncand <= kCand;
    };
    const CandSrc cs{sm.cz, sm.cid, 0};
    auto cands = [&]() { return CandSrc{cs.z, cs.id, min(sm.ncand, kCand)}; };
    const int top_k = r.sp.top_k;
    if (top_k > 0 && top_k < vocab) {
      const Cut c = descend<true, false>(all, zmax, static_cast<float>(top_k), 0u, sm);
      kkey = c.key;
      kties = top_k - c.cnt_gt;
      kmass = c.mass_gt + kties * (c.mass_eq / c.cnt_eq);
      if (kties >= c.cnt_eq) kties = INT_MAX;
      gather(c);
    }
    if (r.sp.top_p < 1.0f) {
      const float target = r.sp.top_p * kmass;
      const Cut c = cand ? descend<false, false>(cands(), zmax, target, kkey, sm)
                         : descend<false, false>(all, zmax, target, kkey, sm);
      const float e = c.mass_eq / c.cnt_eq;
      int ties = c.cnt_eq;
      if (e > 0.0f) ties = static_cast<int>(fminf(ceilf((target - c.mass_gt) / e), 1e9f));
      ties = max(1, min(ties, c.cnt_eq));
      if (c.key > kkey || (c.key == kkey && ties < kties)) {
        kkey = c.key;
        kties = ties >= c.cnt_eq ? INT_MAX : ties;
        kmass = c.mass_gt + ties * e;
      }
      if (!cand) gather(c);
    }
    if (r.sp.min_p > 0.0f) {
      const float vmin = zmax + __logf(r.sp.min_p);                // prob / max prob >= min_p
      const float kval = kkey == 0 ? -INFINITY : key_value(kkey);  // 0: no cut yet
      if (vmin > kval) {
        float m = 0.0f;
        if (threadIdx.x == 0) sm.kmin = 0xffffffffu;
        __syncthreads();
        uint32_t kmin = 0xffffffffu;
        auto take = [&](float zi, int64_t) {
          if (zi >= vmin) {
            m += __expf(zi - zmax);
            kmin = min(kmin, order_key(zi));
          }
        };
        if (cand)
          cands().each(take);
        else
          all.each(take);
        atomicMin(&sm.kmin, kmin);
        m = block_sum(m, sm.fs);
        kkey = sm.kmin;
        kties = INT_MAX;
        kmass = m;
      }
    }
    const float u = philox::uniform(r.sp.seed, r.sp.counter_hi, r.sp.counter_lo);
    const float target = u * kmass;
    const Cut c = cand ? descend<false, true>(cands(), zmax, target, kkey, sm)
                       : descend<false, true>(all, zmax, target, kkey, sm);
    const float e = c.mass_eq / c.cnt_eq;
    key = c.key;
    j = 1;
    if (e > 0.0f) j = static_cast<int>(fminf(floorf((target - c.mass_gt) / e), 1e9f)) + 1;
    j = max(1, min(j, c.cnt_eq));
    if (key < kkey || (key == kkey && j > kties)) {  // rounding carried it past the cut
      key = kkey;
      j = kties;
    } else if (c.cnt_eq == 1) {
      only = c.id_if_one;
    }
  }
  const int tok = only >= 0 ? only : jth_id(r, vocab, key, j, sm);
  if (threadIdx.x == 0) {
    tokens[row] = tok;
    if (logprobs) logprobs[row] = raw.s > 0.0f ? r.x[tok] - raw.m - __logf(raw.s) : 0.0f;
  }
}

}  // namespace

void sample_rows(const float* logits, int64_t n, int64_t vocab, int64_t ld, const SampleRowParams* params,
                 const int32_t* output_counts, const uint8_t* prompt_mask, int32_t* tokens, float* logprobs,
                 cudaStream_t stream) {
  if (n <= 0) return;
  if (vocab <= 0 || vocab > INT_MAX) contract_violation("sample_rows: vocab out of range");
  sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, vocab, ld, params, output_counts,
                                                                   prompt_mask, tokens, logprobs);
}

}  // namespace gpuopt::llm::cuda
