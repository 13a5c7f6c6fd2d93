// Int8 GEMM micro-benchmark (scripts/gpu/gemm8/run.sh): a CUTLASS 3 sm_90a s8 x s8 -> s32 GEMM with
// Int8Gemm's epilogue (a_scale * b_scale[n] * acc + bias[n], then GELU or nothing, f16 out or int8
// of v / y_scale) in one of eight tile / cluster / schedule configurations (-DCFG=n), timed at
// BERT-base b256 shapes; one output element checked against a double-precision dot product.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
using namespace cute;

struct EpiArgs { int act = 0; };
#ifndef FASTGELU
#define FASTGELU 0
#endif
__device__ __forceinline__ float gelu_erf(float v) {
#if FASTGELU
  // tanh form through the hardware tanh (approximate)
  float t; float u = 0.79788456f * fmaf(0.044715f * v * v, v, v);
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
  return 0.5f * v * (1.f + t);
#else
  return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
#endif
}
template <bool kInt8Out>
struct EpiOf {
  template <class FragF>
  struct Fn {
    using Arguments = EpiArgs;
    template <class... Frags>
    CUTLASS_DEVICE FragF operator()(FragF const& acc, FragF const& sa, FragF const& sb, FragF const& bias, Frags const&... rest) const {
      auto const& tail = cute::make_tuple(rest...);
      Arguments const& p = get<sizeof...(Frags) - 1>(tail);
      FragF out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragF::kElements; ++i) {
        float v = fmaf(acc[i], sa[i] * sb[i], bias[i]);
        if (p.act == 2) v = gelu_erf(v); else if (p.act == 1) v = fmaxf(v, 0.f);
        if constexpr (kInt8Out) { const float ys = get<0>(tail)[i]; v = fminf(fmaxf(rintf(v / ys), -128.f), 127.f); }
        out[i] = v;
      }
      return out;
    }
  };
};
template <class Tl, class ElementD, class... Extra>
using Evt = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<EpiOf<std::is_same_v<ElementD, int8_t>>::template Fn, ElementD, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch,
    cutlass::epilogue::fusion::Sm90ScalarBroadcast<cutlass::half_t>,
    cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tl, cutlass::half_t, float, Stride<_0, bool, int64_t>>,
    cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tl, cutlass::half_t, float>, Extra...>;

#ifndef CFG
#define CFG 0
#endif
// Tile M x N x K, cluster M x N, and the mainloop / epilogue schedules of each configuration.
#define GEMM8_CONFIG(TM, TN, TK, CM, CN, MAIN, EPI)                                   \
  using TileT = Shape<_##TM, _##TN, _##TK>;                                           \
  using Cluster = Shape<_##CM, _##CN, _1>;                                            \
  using MainS = cutlass::gemm::KernelTmaWarpSpecialized##MAIN;                        \
  using EpiS = cutlass::epilogue::EPI;
#define COOP Cooperative, TmaWarpSpecializedCooperative
#define PING Pingpong, TmaWarpSpecialized
#define GEMM8_CONFIG_(...) GEMM8_CONFIG(__VA_ARGS__)
#if CFG == 0
GEMM8_CONFIG_(128, 128, 128, 1, 1, COOP)
#elif CFG == 1
GEMM8_CONFIG_(128, 256, 128, 1, 1, COOP)
#elif CFG == 2
GEMM8_CONFIG_(128, 256, 128, 2, 1, COOP)
#elif CFG == 3
GEMM8_CONFIG_(64, 256, 128, 1, 1, PING)
#elif CFG == 4
GEMM8_CONFIG_(128, 128, 128, 1, 1, PING)
#elif CFG == 5
GEMM8_CONFIG_(256, 128, 128, 1, 2, COOP)
#elif CFG == 6
GEMM8_CONFIG_(128, 128, 128, 2, 1, PING)
#elif CFG == 7
GEMM8_CONFIG_(128, 256, 64, 2, 1, COOP)
#endif

template <class ElementD>
struct G {
  using E = std::conditional_t<std::is_same_v<ElementD, int8_t>, Evt<TileT, ElementD, cutlass::epilogue::fusion::Sm90ScalarBroadcast<cutlass::half_t>>, Evt<TileT, ElementD>>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using CE = typename cutlass::epilogue::collective::CollectiveBuilder<cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileT, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, void, cutlass::layout::RowMajor, kAlignD,
      ElementD, cutlass::layout::RowMajor, kAlignD, EpiS, E>::CollectiveOp;
  using CM = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, 16, int8_t,
      cutlass::layout::ColumnMajor, 16, int32_t, TileT, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CE::SharedStorage))>, MainS>::CollectiveOp;
  using K = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CM, CE>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<K>;
};
template <class S> S packed(int64_t ld, int64_t b) { S s{}; get<0>(s) = ld; get<2>(s) = b; return s; }

template <class ElementD>
float run(int m, int n, int k, int act, const int8_t* A, const int8_t* B, const cutlass::half_t* sa, const cutlass::half_t* sb,
          const cutlass::half_t* bias, const cutlass::half_t* ys, void* D, void* ws, int sms) {
  using Gemm = typename G<ElementD>::Gemm;
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {m, n, k, 1};
  args.mainloop.ptr_A = A; args.mainloop.dA = packed<typename Gemm::GemmKernel::StrideA>(k, (int64_t)m * k);
  args.mainloop.ptr_B = B; args.mainloop.dB = packed<typename Gemm::GemmKernel::StrideB>(k, (int64_t)n * k);
  auto& fa = args.epilogue.thread;
  get<1>(fa).scalar_ptrs[0] = sa;
  get<2>(fa).ptr_row = sb; get<2>(fa).dRow = {_0{}, true, int64_t{0}};
  get<3>(fa).ptr_row = bias; get<3>(fa).null_default = cutlass::half_t(0.f);
  if constexpr (std::is_same_v<ElementD, int8_t>) { get<4>(fa).scalar_ptrs[0] = ys; get<5>(fa).act = act; } else { get<4>(fa).act = act; }
  args.epilogue.dC = packed<typename Gemm::GemmKernel::StrideC>(n, (int64_t)m * n);
  args.epilogue.ptr_D = static_cast<ElementD*>(D);
  args.epilogue.dD = packed<typename Gemm::GemmKernel::StrideD>(n, (int64_t)m * n);
  args.hw_info.device_id = 0; args.hw_info.sm_count = sms;
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) { printf("can_implement refused\n"); return -1; }
  if (Gemm::get_workspace_size(args) > (64 << 20)) { printf("ws\n"); return -1; }
  cudaStream_t s = 0;
  if (gemm.initialize(args, ws, s) != cutlass::Status::kSuccess) { printf("init failed\n"); return -1; }
  for (int i = 0; i < 5; ++i) gemm.run(s);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const int iters = 50;
  cudaEventRecord(e0, s);
  for (int i = 0; i < iters; ++i) gemm.run(s);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) { printf("cuda %s\n", cudaGetErrorString(err)); return -1; }
  return ms * 1000.f / iters;
}

int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int M = 32768;
  struct Sh { const char* name; int n, k, act; bool i8; } shapes[] = {
      {"qkv", 2304, 768, 0, false}, {"out", 768, 768, 0, false}, {"ffn1gelu_i8", 3072, 768, 2, true}, {"ffn2", 768, 3072, 0, false},
      {"ffn1_f16", 3072, 768, 0, false}};
  size_t maxA = (size_t)M * 3072, maxB = 3072 * 3072;
  int8_t *A, *B; cutlass::half_t *sa, *sb, *bias, *ys; void *D, *ws;
  cudaMalloc(&A, maxA); cudaMalloc(&B, maxB); cudaMalloc(&D, (size_t)M * 3072 * 2); cudaMalloc(&ws, 64 << 20);
  cudaMalloc(&sa, 2); cudaMalloc(&sb, 3072 * 2); cudaMalloc(&bias, 3072 * 2); cudaMalloc(&ys, 2);
  std::vector<int8_t> ha(maxA), hb(maxB);
  srand(1); for (auto& v : ha) v = (int8_t)(rand() % 255 - 127); for (auto& v : hb) v = (int8_t)(rand() % 255 - 127);
  cudaMemcpy(A, ha.data(), maxA, cudaMemcpyHostToDevice); cudaMemcpy(B, hb.data(), maxB, cudaMemcpyHostToDevice);
  std::vector<cutlass::half_t> h1(3072, cutlass::half_t(0.001f)), h0(3072, cutlass::half_t(0.5f));
  cutlass::half_t one(0.01f), y(0.05f);
  cudaMemcpy(sa, &one, 2, cudaMemcpyHostToDevice); cudaMemcpy(ys, &y, 2, cudaMemcpyHostToDevice);
  cudaMemcpy(sb, h1.data(), 3072 * 2, cudaMemcpyHostToDevice); cudaMemcpy(bias, h0.data(), 3072 * 2, cudaMemcpyHostToDevice);
  double total = 0;
  for (auto& s : shapes) {
    float us = s.i8 ? run<int8_t>(M, s.n, s.k, s.act, A, B, sa, sb, bias, ys, D, ws, sms)
                    : run<cutlass::half_t>(M, s.n, s.k, s.act, A, B, sa, sb, bias, ys, D, ws, sms);
    // check one element (f16 out): row 7, col 5
    double ref = 0; for (int kk = 0; kk < s.k; ++kk) ref += (double)ha[(size_t)7 * s.k + kk] * hb[(size_t)5 * s.k + kk];
    double v = ref * 0.01 * 0.001 + 0.5; if (s.act == 2) v = 0.5 * v * (1 + erf(v / sqrt(2.0)));
    float got;
    if (s.i8) { int8_t g; cudaMemcpy(&g, (int8_t*)D + (size_t)7 * s.n + 5, 1, cudaMemcpyDeviceToHost); got = g * 0.05f; }
    else { cutlass::half_t g; cudaMemcpy(&g, (cutlass::half_t*)D + (size_t)7 * s.n + 5, 2, cudaMemcpyDeviceToHost); got = float(g); }
    double tops = 2.0 * M * s.n * s.k / (us * 1e-6) / 1e12;
    printf("CFG%d %-12s n=%d k=%d %8.1f us %7.0f TOP/s  check got %.4f ref %.4f\n", CFG, s.name, s.n, s.k, us, tops, got, v);
    if (s.name[0] != 'f' || s.name[3] != '1' || s.i8) total += us;
  }
  printf("CFG%d layer (qkv+out+ffn1gelu_i8+ffn2) %.1f us x12 = %.3f ms\n", CFG, total, total * 12 / 1000);
}
