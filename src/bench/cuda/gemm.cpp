// cuBLASLt matrix multiply: C = A^T * B, square n, on random data. The algorithm comes from
// cuBLASLt's heuristics (with a 64 MiB workspace); the first `max_algos` candidates are timed
// briefly and the fastest is timed in full, since the heuristic's first pick is not always the
// fastest on a given chip.
#include "bench/cuda/common.h"
#include "bench/gpu.h"
#include "core/dtype.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <random>

namespace gpuopt::bench {

namespace {

constexpr size_t kWorkspaceBytes = 64ull << 20;

struct LtTypes {
  cudaDataType_t ab, cd, scale;
  cublasComputeType_t compute;
  cuda::FillKind fill;
};

LtTypes lt_types(GemmType t) {
  switch (t) {
    case GemmType::F32:
      return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, cuda::FillKind::F32};
    case GemmType::TF32:
      return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, cuda::FillKind::F32};
    case GemmType::F16:
      return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, cuda::FillKind::F16};
    case GemmType::BF16:
      return {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, cuda::FillKind::BF16};
    case GemmType::FP8:
      return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, cuda::FillKind::FP8E4M3};
    case GemmType::INT8:
      return {CUDA_R_8I, CUDA_R_32I, CUDA_R_32I, CUBLAS_COMPUTE_32I, cuda::FillKind::I8};
  }
  return {};
}

template <typename T, auto Destroy>
struct LtHandle {
  T h = nullptr;
  ~LtHandle() {
    if (h) Destroy(h);
  }
};

// One prepared problem: handle, descriptors, buffers (rotating sets when one set fits in L2).
struct Problem {
  LtHandle<cublasLtHandle_t, cublasLtDestroy> lt;
  LtHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op;
  LtHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> a, b, c;
  LtHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
  std::vector<cuda::DeviceBuffer> bufs;  // per set: A, B, D
  cuda::DeviceBuffer workspace;
  int sets = 1;
  float alpha_f = 1, beta_f = 0;
  int32_t alpha_i = 1, beta_i = 0;
  bool int_scale = false;
  const void* alpha() const { return int_scale ? static_cast<const void*>(&alpha_i) : &alpha_f; }
  const void* beta() const { return int_scale ? static_cast<const void*>(&beta_i) : &beta_f; }
};

Status prepare(GemmType t, int n, int device, cudaStream_t st, Problem* p) {
  const LtTypes ty = lt_types(t);
  GPUOPT_CHECK_CALL(cublasLtCreate(&p->lt.h));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescCreate(&p->op.h, ty.compute, ty.scale));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op.h, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op.h, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Column-major: A stored k x m (used transposed), B k x n, D m x n.
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->a.h, ty.ab, n, n, n));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->b.h, ty.ab, n, n, n));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->c.h, ty.cd, n, n, n));
  GPUOPT_CHECK_CALL(cublasLtMatmulPreferenceCreate(&p->pref.h));
  const uint64_t ws = kWorkspaceBytes;
  GPUOPT_CHECK_CALL(
      cublasLtMatmulPreferenceSetAttribute(p->pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  GPUOPT_RETURN_IF_ERROR(p->workspace.alloc(kWorkspaceBytes));
  p->int_scale = t == GemmType::INT8;
  const size_t nn = static_cast<size_t>(n) * n;
  const size_t set_bytes = nn * (2 * gemm_in_bytes(t) + gemm_out_bytes(t));
  int l2 = 0;
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  p->sets = static_cast<int>(std::clamp<size_t>((3 * static_cast<size_t>(l2) + set_bytes - 1) / set_bytes, 1, 8));
  for (int s = 0; s < p->sets; ++s) {
    for (int m = 0; m < 3; ++m) {
      cuda::DeviceBuffer b;
      GPUOPT_RETURN_IF_ERROR(b.alloc(nn * (m < 2 ? gemm_in_bytes(t) : gemm_out_bytes(t))));
      if (m < 2)
        cuda::launch_fill(ty.fill, b.get(), nn, 1000 + 3 * s + m, st);
      else
        GPUOPT_CHECK_CALL(cudaMemsetAsync(b.get(), 0xFF, b.size(), st));
      p->bufs.push_back(std::move(b));
    }
  }
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status run_once(const Problem& p, const cublasLtMatmulAlgo_t& algo, int set, cudaStream_t st) {
  const void* A = p.bufs[3 * set].get();
  const void* B = p.bufs[3 * set + 1].get();
  void* D = p.bufs[3 * set + 2].get();
  GPUOPT_CHECK_CALL(cublasLtMatmul(p.lt.h, p.op.h, p.alpha(), A, p.a.h, B, p.b.h, p.beta(), D, p.c.h, D, p.c.h, &algo,
                                   p.workspace.get(), kWorkspaceBytes, st));
  return Status::Ok();
}

std::string describe(const cublasLtMatmulAlgo_t& algo) {
  int id = -1, tile = -1, stages = -1, splitk = -1;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), nullptr);
  return fmt::format("algo {} tile {} stages {} splitk {}", id, tile, stages, splitk);
}

Status check_supported(GemmType t, int device) {
  int major = 0, minor = 0;
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (t == GemmType::FP8 && major * 10 + minor < 89)
    return Status::Unimplemented("fp8 e4m3 GEMM needs compute capability 8.9 or newer (this GPU: {}.{})", major, minor);
  if (t == GemmType::BF16 && major < 8) return Status::Unimplemented("bf16 GEMM needs compute capability 8.0 or newer");
  if (t == GemmType::TF32 && major < 8) return Status::Unimplemented("tf32 needs compute capability 8.0 or newer");
  return Status::Ok();
}

}  // namespace

Result<GemmRun> time_gemm(GemmType t, int n, int device, int repeat, int max_algos) {
  if (n <= 0 || n % 16) return Status::InvalidArgument("GEMM size {}: must be a positive multiple of 16", n);
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  GPUOPT_RETURN_IF_ERROR(check_supported(t, device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  Problem p;
  GPUOPT_RETURN_IF_ERROR(prepare(t, n, device, st.get(), &p));
  std::vector<cublasLtMatmulHeuristicResult_t> heur(std::max(1, max_algos));
  int found = 0;
  GPUOPT_CHECK_CALL(cublasLtMatmulAlgoGetHeuristic(p.lt.h, p.op.h, p.a.h, p.b.h, p.c.h, p.c.h, p.pref.h,
                                                   static_cast<int>(heur.size()), heur.data(), &found));
  if (found == 0) return Status::Unimplemented("cuBLASLt has no algorithm for {} GEMM n={}", gemm_type_name(t), n);
  // Screen the candidates with a few samples each, then time the winner in full.
  int best = -1;
  double best_s = 0;
  for (int c = 0; c < found; ++c) {
    if (heur[c].state != CUBLAS_STATUS_SUCCESS) continue;
    auto op = [&](uint64_t i) { return run_once(p, heur[c].algo, static_cast<int>(i % p.sets), st.get()); };
    auto r = cuda::time_on_stream(st.get(), found > 1 ? 3 : repeat, op, 2e-3, 50, 2);
    if (!r.ok()) continue;  // a candidate that fails to run is skipped, not fatal
    if (best < 0 || r->median < best_s) best = c, best_s = r->median;
  }
  if (best < 0) return Status::Internal("no cuBLASLt candidate ran for {} GEMM n={}", gemm_type_name(t), n);
  GemmRun run;
  run.candidates = found;
  run.algo = fmt::format("{} (best of {} heuristic candidates)", describe(heur[best].algo), found);
  auto op = [&](uint64_t i) { return run_once(p, heur[best].algo, static_cast<int>(i % p.sets), st.get()); };
  GPUOPT_ASSIGN_OR_RETURN(run.seconds, cuda::time_on_stream(st.get(), repeat, op, 2e-3, 50, 2));
  return run;
}

namespace {
float fp8_e4m3_to_float(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 7;
  float f;
  if (exp == 0)
    f = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  else if (exp == 15 && man == 7)
    f = NAN;
  else
    f = std::ldexp(1.0f + man / 8.0f, exp - 7);
  return sign ? -f : f;
}

// Element i of a buffer of type `t` as a float (host side).
double element(cudaDataType_t t, const std::vector<uint8_t>& buf, size_t i) {
  switch (t) {
    case CUDA_R_32F:
      return reinterpret_cast<const float*>(buf.data())[i];
    case CUDA_R_16F:
      return Half::to_float(reinterpret_cast<const uint16_t*>(buf.data())[i]);
    case CUDA_R_16BF:
      return BFloat16::to_float(reinterpret_cast<const uint16_t*>(buf.data())[i]);
    case CUDA_R_8F_E4M3:
      return fp8_e4m3_to_float(buf[i]);
    case CUDA_R_8I:
      return static_cast<int8_t>(buf[i]);
    case CUDA_R_32I:
      return reinterpret_cast<const int32_t*>(buf.data())[i];
    default:
      return NAN;
  }
}
}  // namespace

Status check_gemm(GemmType t, int n, int device) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  GPUOPT_RETURN_IF_ERROR(check_supported(t, device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  Problem p;
  GPUOPT_RETURN_IF_ERROR(prepare(t, n, device, st.get(), &p));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  GPUOPT_CHECK_CALL(
      cublasLtMatmulAlgoGetHeuristic(p.lt.h, p.op.h, p.a.h, p.b.h, p.c.h, p.c.h, p.pref.h, 1, &heur, &found));
  if (found == 0) return Status::Unimplemented("no algorithm");
  GPUOPT_RETURN_IF_ERROR(run_once(p, heur.algo, 0, st.get()));
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  const LtTypes ty = lt_types(t);
  std::vector<uint8_t> A(p.bufs[0].size()), B(p.bufs[1].size()), D(p.bufs[2].size());
  GPUOPT_CHECK_CALL(cudaMemcpy(A.data(), p.bufs[0].get(), A.size(), cudaMemcpyDeviceToHost));
  GPUOPT_CHECK_CALL(cudaMemcpy(B.data(), p.bufs[1].get(), B.size(), cudaMemcpyDeviceToHost));
  GPUOPT_CHECK_CALL(cudaMemcpy(D.data(), p.bufs[2].get(), D.size(), cudaMemcpyDeviceToHost));
  // Relative tolerance against sum |a||b|: the accumulation error bound of each type.
  const double tol = t == GemmType::F32 ? 1e-5 : t == GemmType::TF32 ? 2e-3 : t == GemmType::INT8 ? 0 : 1e-2;
  std::mt19937 rng(42);
  for (int s = 0; s < 256; ++s) {
    const size_t i = rng() % n, j = rng() % n;  // D[i, j] (column-major: i + j*n)
    double ref = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      // A stored k x m column-major and used transposed: A^T[i, k] = A[k + i*n].
      const double a = element(ty.ab, A, k + i * n), b = element(ty.ab, B, k + j * n);
      ref += a * b;
      mag += std::fabs(a * b);
    }
    const double got = element(ty.cd, D, i + j * n);
    if (!(std::fabs(got - ref) <= tol * mag + (ty.cd == CUDA_R_16BF ? 8e-3 : 1e-3) * std::fabs(ref)))
      return Status::Internal("{} GEMM n={}: D[{},{}] = {}, CPU says {} (sum |ab| {})", gemm_type_name(t), n, i, j, got,
                              ref, mag);
  }
  return Status::Ok();
}

}  // namespace gpuopt::bench
