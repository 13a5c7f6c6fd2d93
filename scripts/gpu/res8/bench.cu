// Int8 residual-fused 1x1 conv micro-benchmark (scripts/gpu/res8/run.sh). ResNet-50's bottleneck
// ends with a 1x1 stride-1 conv ("conv3", no ReLU) whose int8 output is only read by the residual
// add (gpuopt's Int8Add). A 1x1 stride-1 NHWC conv is a GEMM: A = activations [M = N*H*W, K = C]
// row-major int8, B = weights [Cout, C] (K-major), D = [M, Cout] row-major int8. Here one CUTLASS 3
// sm_90a s8 x s8 -> s32 GEMM does conv3 + the add in its epilogue (a custom Sm90EVT), float32 math:
//   y = acc * alpha[n] + bias[n]                         (alpha = x_scale * w_scale[n])
//   c = clamp(rint(y / y_scale), -128, 127)               (conv3's own int8 output)
//   r = c * y_scale + Z[m, n] * z_scale                   (Z: the residual, int8 [M, Cout], the C source)
//   if relu: r = max(r, 0)
//   D = clamp(rint(r / out_scale), -128, 127)
// (products and sums rounded separately, __fmul_rn / __fadd_rn / __fdiv_rn: no FMA contraction,
// like a CPU reference). The "plain" variant is the same GEMM without the residual
// (D = c, ElementC = void), to compare with a plain conv3.
// -DCFG=0..4: tile / cluster / schedule. Each variant is first checked against a naive CUDA
// kernel (same float math) at batch 2 for the four shape classes (residual: relu off and on);
// then timed at the 16 ResNet-50 conv3 layers (4 distinct shapes x multiplicity 3/4/6/3) per batch.
// Usage: ./b<cfg> [NB ...] (default 256 32).
// Rows: tag variant NB idx M K N mult ms GB/s TOP/s  (GB/s over A + B + Z + D bytes; plain: A + B + D).
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/kernel_hardware_info.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
using namespace cute;

#ifndef CFG
#define CFG 0
#endif

// ---------------------------------------------------------------- the epilogue math (shared with the reference)
struct ResParams { float y_scale = 1.f, z_scale = 1.f, out_scale = 1.f; int relu = 0; };
struct PlainParams { float y_scale = 1.f; };
__device__ __forceinline__ float sat8(float v) { return fminf(fmaxf(rintf(v), -128.f), 127.f); }
#ifndef FASTEPI
#define FASTEPI 0
#endif
// -DFASTEPI=1: the divisions as a product with the hardware reciprocal (one MUFU op instead of a
// correctly rounded division), the reference kernel too: to see what the divisions cost.
__device__ __forceinline__ float qdiv(float a, float b) {
#if FASTEPI
  return __fmul_rn(a, __frcp_rn(b));
#else
  return __fdiv_rn(a, b);
#endif
}
__device__ __forceinline__ float conv_code(float acc, float alpha, float bias, float ys) {
  const float y = __fadd_rn(__fmul_rn(acc, alpha), bias);
  return sat8(qdiv(y, ys));
}
__device__ __forceinline__ float res_code(float acc, float z, float alpha, float bias, const ResParams& p) {
  const float c = conv_code(acc, alpha, bias, p.y_scale);
  float r = __fadd_rn(__fmul_rn(c, p.y_scale), __fmul_rn(z, p.z_scale));
  if (p.relu) r = fmaxf(r, 0.f);
  return sat8(qdiv(r, p.out_scale));
}

// Custom Sm90Compute functors: Sm90Compute converts every child's fragment to float, calls
// Fn<Array<float, N>>{}(children..., params) and converts the (integral, in-range) result to int8.
template <class FragF>
struct ResFn {
  using Arguments = ResParams;
  CUTLASS_DEVICE FragF operator()(FragF const& acc, FragF const& z, FragF const& alpha, FragF const& bias, Arguments const& p) const {
    FragF out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < FragF::kElements; ++i) out[i] = res_code(acc[i], z[i], alpha[i], bias[i], p);
    return out;
  }
};
template <class FragF>
struct PlainFn {
  using Arguments = PlainParams;
  CUTLASS_DEVICE FragF operator()(FragF const& acc, FragF const& alpha, FragF const& bias, Arguments const& p) const {
    FragF out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < FragF::kElements; ++i) out[i] = conv_code(acc[i], alpha[i], bias[i], p.y_scale);
    return out;
  }
};
template <class Tl> using RowVec = cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tl, float, float>;  // float vector over N
// Residual: children (0) acc, (1) C = Z (int8), (2) alpha[n], (3) bias[n]; node args (4) ResParams.
template <class Tl>
using EvtRes = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<ResFn, int8_t, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, cutlass::epilogue::fusion::Sm90SrcFetch<int8_t>, RowVec<Tl>, RowVec<Tl>>;
// Plain: children (0) acc, (1) alpha[n], (2) bias[n]; node args (3) PlainParams.
template <class Tl>
using EvtPlain = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<PlainFn, int8_t, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, RowVec<Tl>, RowVec<Tl>>;

// ---------------------------------------------------------------- configurations
#define RES8_CONFIG(TM, TN, TK, CM, CN, MAIN, EPI)                 \
  using TileT = Shape<_##TM, _##TN, _##TK>;                        \
  using Cluster = Shape<_##CM, _##CN, _1>;                         \
  using MainS = cutlass::gemm::KernelTmaWarpSpecialized##MAIN;     \
  using EpiS = cutlass::epilogue::EPI;                             \
  static const char* kCfgName = #TM "x" #TN "x" #TK " c" #CM "x" #CN " " #MAIN;
#define COOP Cooperative, TmaWarpSpecializedCooperative
#define PING Pingpong, TmaWarpSpecialized
#define RES8_CONFIG_(...) RES8_CONFIG(__VA_ARGS__)
#if CFG == 0
RES8_CONFIG_(128, 128, 128, 1, 1, COOP)
#elif CFG == 1
RES8_CONFIG_(128, 256, 128, 2, 1, COOP)
#elif CFG == 2
RES8_CONFIG_(64, 256, 128, 1, 1, PING)
#elif CFG == 3
RES8_CONFIG_(256, 128, 128, 1, 2, COOP)
#elif CFG == 4
RES8_CONFIG_(128, 128, 64, 1, 1, PING)
#endif

template <bool kRes>
struct G {
  using E = std::conditional_t<kRes, EvtRes<TileT>, EvtPlain<TileT>>;
  using ElementC = std::conditional_t<kRes, int8_t, void>;
  using CE = typename cutlass::epilogue::collective::CollectiveBuilder<cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileT, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, ElementC, cutlass::layout::RowMajor, 16,
      int8_t, cutlass::layout::RowMajor, 16, EpiS, E>::CollectiveOp;
  using CM = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, 16, int8_t,
      cutlass::layout::ColumnMajor, 16, int32_t, TileT, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CE::SharedStorage))>, MainS>::CollectiveOp;
  using K = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CM, CE>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<K>;
};
template <class S> S packed(int64_t ld, int64_t b) { S s{}; get<0>(s) = ld; get<2>(s) = b; return s; }

struct Problem {  // device pointers and scalars of one GEMM
  int m, n, k;
  const int8_t *A, *B, *Z; const float *alpha, *bias; int8_t* D;
  ResParams p;
};

template <bool kRes>
struct Runner {
  using Gemm = typename G<kRes>::Gemm;
  Gemm gemm;
  typename Gemm::Arguments args{};
  const char* why = nullptr;
  bool setup(const Problem& pr, void* ws, size_t ws_bytes, int sms) {
    const int m = pr.m, n = pr.n, k = pr.k;
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {m, n, k, 1};
    args.mainloop.ptr_A = pr.A; args.mainloop.dA = packed<typename Gemm::GemmKernel::StrideA>(k, (int64_t)m * k);
    args.mainloop.ptr_B = pr.B; args.mainloop.dB = packed<typename Gemm::GemmKernel::StrideB>(k, (int64_t)n * k);
    auto& f = args.epilogue.thread;
    if constexpr (kRes) {
      get<2>(f).ptr_row = pr.alpha; get<3>(f).ptr_row = pr.bias; get<4>(f) = pr.p;  // 5 ops: a cute::tuple
      args.epilogue.ptr_C = pr.Z;
    } else {
      f.op_1.ptr_row = pr.alpha; f.op_2.ptr_row = pr.bias; f.op_3.y_scale = pr.p.y_scale;  // 4 ops: named members
      args.epilogue.ptr_C = nullptr;
    }
    args.epilogue.dC = packed<typename Gemm::GemmKernel::StrideC>(n, (int64_t)m * n);
    args.epilogue.ptr_D = pr.D;
    args.epilogue.dD = packed<typename Gemm::GemmKernel::StrideD>(n, (int64_t)m * n);
    int dev = 0; cudaGetDevice(&dev);
    args.hw_info.device_id = dev; args.hw_info.sm_count = sms;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) { why = "can_implement refused"; return false; }
    if (Gemm::get_workspace_size(args) > ws_bytes) { why = "workspace too large"; return false; }
    if (gemm.initialize(args, ws) != cutlass::Status::kSuccess) { why = "initialize failed"; return false; }
    return true;
  }
  void launch() { gemm.run(); }
};

// ---------------------------------------------------------------- device helpers
__global__ void fill_s8(int8_t* p, size_t n, uint32_t seed, int lo, int hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = (int8_t)(lo + (int)(x % (uint32_t)(hi - lo + 1)));
  }
}
static void fill(int8_t* p, size_t n, uint32_t seed, int lo, int hi) { fill_s8<<<1024, 256>>>(p, n, seed, lo, hi); }
// Naive reference: one thread per output element, int32 dot product, the same float epilogue.
__global__ void ref_gemm(Problem pr, int res) {
  const size_t total = (size_t)pr.m * pr.n;
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total; o += (size_t)gridDim.x * blockDim.x) {
    const int n = o % pr.n; const size_t m = o / pr.n;
    int acc = 0;
    for (int c = 0; c < pr.k; ++c) acc += (int)pr.A[m * pr.k + c] * (int)pr.B[(size_t)n * pr.k + c];
    const float a = __int2float_rn(acc);
    const float v = res ? res_code(a, (float)pr.Z[o], pr.alpha[n], pr.bias[n], pr.p) : conv_code(a, pr.alpha[n], pr.bias[n], pr.p.y_scale);
    pr.D[o] = (int8_t)v;
  }
}
#include "../bench_timing.cuh"  // median, spin, time_median

// ---------------------------------------------------------------- shapes and data
struct Shape4 { int HW, C, K, mult; };  // output pixels per image (H = W), in channels, out channels, layers
static const Shape4 kShapes[] = {{56, 64, 256, 3}, {28, 128, 512, 4}, {14, 256, 1024, 6}, {7, 512, 2048, 3}};
// x in [-127, 127], w in [-31, 31] (std ~ 73 and ~ 18: acc std ~ 1340 sqrt(K)); Z in [-127, 127].
// alpha[n] = y_scale * u / std(acc), u in [10, 70): conv3's codes spread ~10..70 (little saturation);
// that puts alpha at ~1e-5..3e-4 for these scales. bias in [-0.5, 0.5].
static const float kYs = 0.05f, kZs = 0.04f, kOs = 0.09f;
static void make_epilogue(int n, int k, float* d_alpha, float* d_bias, uint32_t seed, float* amin, float* amax) {
  std::vector<float> a(n), b(n);
  const float sd = 1340.f * sqrtf((float)k);
  uint32_t s = seed * 747796405u + 1;
  auto u01 = [&] { s = s * 1664525u + 1013904223u; return (s >> 8) * (1.f / 16777216.f); };
  *amin = 1e30f; *amax = 0.f;
  for (int i = 0; i < n; ++i) {
    a[i] = kYs * (10.f + 60.f * u01()) / sd; b[i] = u01() - 0.5f;
    *amin = std::min(*amin, a[i]); *amax = std::max(*amax, a[i]);
  }
  cudaMemcpy(d_alpha, a.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_bias, b.data(), n * 4, cudaMemcpyHostToDevice);
}
static int compare(const int8_t* d_y, const int8_t* d_ref, size_t n, size_t* ndiff, size_t* nsat) {
  std::vector<int8_t> a(n), b(n);
  cudaMemcpy(a.data(), d_y, n, cudaMemcpyDeviceToHost); cudaMemcpy(b.data(), d_ref, n, cudaMemcpyDeviceToHost);
  int m = 0; *ndiff = 0; *nsat = 0;
  for (size_t i = 0; i < n; ++i) { int d = abs(a[i] - b[i]); m = std::max(m, d); *ndiff += d != 0; *nsat += b[i] == 127 || b[i] == -128; }
  return m;
}

int main(int argc, char** argv) {
  std::vector<int> nbs;
  for (int i = 1; i < argc; ++i) nbs.push_back(atoi(argv[i]));
  if (nbs.empty()) nbs = {256, 32};
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) { printf("no CUDA device\n"); return 1; }
  const int sms = prop.multiProcessorCount;
  char tag[16]; snprintf(tag, sizeof tag, "cfg%d", CFG);
  printf("# %s, %d SMs; %s: CUTLASS sm90 int8 TN GEMM %s, epilogue Sm90EVT (residual: ResFn(acc, C=Z int8, alpha[n], bias[n]);"
         " plain: PlainFn(acc, alpha[n], bias[n])), %d / %d mainloop stages (res / plain)\n",
         prop.name, sms, tag, kCfgName, (int)G<true>::CM::DispatchPolicy::Stages, (int)G<false>::CM::DispatchPolicy::Stages);
  int maxnb = 2; for (int n : nbs) maxnb = std::max(maxnb, n);
  size_t maxA = 0, maxD = 0, maxB = 0;
  for (auto& s : kShapes) {
    const size_t m = (size_t)maxnb * s.HW * s.HW;
    maxA = std::max(maxA, m * s.C); maxD = std::max(maxD, m * s.K); maxB = std::max(maxB, (size_t)s.K * s.C);
  }
  const size_t ws_bytes = 64 << 20;
  int8_t *A, *B, *Z, *D, *Dref; float *alpha, *bias; void* ws;
  cudaMalloc(&A, maxA); cudaMalloc(&B, maxB); cudaMalloc(&Z, maxD); cudaMalloc(&D, maxD); cudaMalloc(&Dref, maxD);
  cudaMalloc(&alpha, 4 * 4096); cudaMalloc(&bias, 4 * 4096); cudaMalloc(&ws, ws_bytes);
  if (cudaGetLastError() != cudaSuccess) { printf("# cudaMalloc failed\n"); return 1; }
  const ResParams base{kYs, kZs, kOs, 0};

  // ---- correctness at batch 2
  int fails = 0;
  for (int si = 0; si < 4; ++si) {
    const auto& s = kShapes[si];
    Problem pr{2 * s.HW * s.HW, s.K, s.C, A, B, Z, alpha, bias, D, base};
    const size_t nd = (size_t)pr.m * pr.n;
    fill(A, (size_t)pr.m * pr.k, 11 + si, -127, 127); fill(B, (size_t)pr.n * pr.k, 23 + si, -31, 31); fill(Z, nd, 37 + si, -127, 127);
    float amin, amax; make_epilogue(pr.n, pr.k, alpha, bias, 3 + si, &amin, &amax);
    for (int variant = 0; variant < 3; ++variant) {  // 0: residual relu off, 1: residual relu on, 2: plain
      const bool res = variant < 2;
      pr.p.relu = variant == 1;
      Problem rp = pr; rp.D = Dref;
      ref_gemm<<<1024, 256>>>(rp, res);
      cudaMemset(D, 0x55, nd);
      const char* why = nullptr; bool ok;
      if (res) { Runner<true> r; ok = r.setup(pr, ws, ws_bytes, sms); if (ok) r.launch(); else why = r.why; }
      else { Runner<false> r; ok = r.setup(pr, ws, ws_bytes, sms); if (ok) r.launch(); else why = r.why; }
      cudaError_t err = cudaDeviceSynchronize();
      const char* vn = res ? (pr.p.relu ? "res relu1" : "res relu0") : "plain";
      if (!ok || err != cudaSuccess) {
        printf("%s check %-9s M%d K%d N%d: %s: FAIL\n", tag, vn, pr.m, pr.k, pr.n, ok ? cudaGetErrorString(err) : why);
        ++fails; if (err != cudaSuccess) return 1; continue;
      }
      size_t ndiff, nsat; const int m = compare(D, Dref, nd, &ndiff, &nsat);
      printf("%s check %-9s M%d K%d N%d (alpha %.1e..%.1e): max |diff| %d codes, %zu of %zu differ, %zu saturated in ref: %s\n", tag, vn,
             pr.m, pr.k, pr.n, amin, amax, m, ndiff, nd, nsat, m <= 1 ? "PASS" : "FAIL");
      fails += m > 1;
    }
  }

  // ---- timing
  for (int nb : nbs) {
    for (int variant = 0; variant < 2; ++variant) {
      const bool res = variant == 0;
      const char* vn = res ? "res" : "plain";
      printf("# %-6s %-5s %4s %3s %8s %5s %5s %2s %9s %7s %6s\n", "tag", "var", "NB", "idx", "M", "K", "N", "x", "ms", "GB/s", "TOP/s");
      double total = 0; bool all = true;
      for (int si = 0; si < 4; ++si) {
        const auto& s = kShapes[si];
        Problem pr{nb * s.HW * s.HW, s.K, s.C, A, B, Z, alpha, bias, D, base};
        const size_t nd = (size_t)pr.m * pr.n;
        fill(A, (size_t)pr.m * pr.k, 5 + si, -127, 127); fill(B, (size_t)pr.n * pr.k, 7 + si, -31, 31); fill(Z, nd, 9 + si, -127, 127);
        float amin, amax; make_epilogue(pr.n, pr.k, alpha, bias, 13 + si, &amin, &amax);
        float ms = -1.f; const char* why = nullptr;
        if (res) { Runner<true> r; if (r.setup(pr, ws, ws_bytes, sms)) ms = time_median([&] { r.launch(); }); else why = r.why; }
        else { Runner<false> r; if (r.setup(pr, ws, ws_bytes, sms)) ms = time_median([&] { r.launch(); }); else why = r.why; }
        const double bytes = (double)pr.m * pr.k + (double)pr.n * pr.k + (res ? 2.0 : 1.0) * nd;
        const double ops = 2.0 * pr.m * (double)pr.n * pr.k;
        printf("%-8s %-5s %4d %3d %8d %5d %5d %2d %9.4f %7.0f %6.0f %s\n", tag, vn, nb, si, pr.m, pr.k, pr.n, s.mult, ms,
               ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0, ms > 0 ? ops / (ms * 1e-3) / 1e12 : 0.0, ms < 0 ? (why ? why : "failed") : "");
        if (ms < 0) all = false; else total += ms * s.mult;
      }
      printf("TOTAL %s %s %d %.4f ms over the 16 conv3 layers%s (%s)\n", tag, vn, nb, total, all ? "" : " (some shapes failed: partial)",
             kCfgName);
    }
  }
  printf("# %s: %d correctness check(s) failed\n", tag, fails);
  return fails ? 2 : 0;
}
