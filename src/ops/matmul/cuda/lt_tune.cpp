#include "ops/matmul/cuda/lt_tune.h"

#include "backends/cuda/plan_store.h"

#include "core/cuda_check.h"
#include "gpuopt/kernel_settings.h"
#include "core/log.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <charconv>
#include <memory>

namespace gpuopt::cuda::lt {

int candidates(const ExecContext& ctx) {
  const KernelSettings& ks = ctx.kernels();
  static_assert(KernelSettings::kMaxMatmulCandidates == kMaxCandidates);
  return ks.matmul_autotune ? ks.matmul_candidates : 1;
}

std::string algo_to_hex(const cublasLtMatmulAlgo_t& a) {
  std::string out;
  for (uint64_t w : a.data) out += fmt::format("{:016x}", w);
  return out;
}

bool algo_from_hex(const std::string& text, cublasLtMatmulAlgo_t* a) {
  constexpr size_t kWords = sizeof(a->data) / sizeof(a->data[0]);
  if (text.size() != kWords * 16) return false;
  for (size_t i = 0; i < kWords; ++i) {
    const char* b = text.data() + i * 16;
    auto [end, ec] = std::from_chars(b, b + 16, a->data[i], 16);
    if (ec != std::errc() || end != b + 16) return false;
  }
  return true;
}

Status choose(ExecContext& ctx, const Descs& d, size_t workspace, const std::string& entry, bool tunable,
              const std::string& what, AlgoChoice* out) {
  out->candidates.clear();
  out->pending.store(false);
  // The plan cache's algorithm for this shape (plan_store.h), if cuBLASLt still accepts it here.
  if (const auto cached = PlanStore::current().find(entry); cached && algo_from_hex(*cached, &out->algo)) {
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(ctx.lt, d.op, d.a, d.b, d.c, d.d, &out->algo, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace)
      return Status::Ok();
    out->algo = cublasLtMatmulAlgo_t{};
  }
  cublasLtMatmulPreference_t pref = nullptr;
  GPUOPT_CHECK_CALL(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)> guard(
      pref, &cublasLtMatmulPreferenceDestroy);
  GPUOPT_CHECK_CALL(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t res[kMaxCandidates]{};
  int found = 0;
  const int want = tunable ? candidates(ctx) : 1;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, d.op, d.a, d.b, d.c, d.d, pref, want, res, &found);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::Unimplemented("cuBLASLt has no algorithm for {}: {}", what, cublasLtGetStatusString(st));
  if (found == 0) return Status::Unimplemented("cuBLASLt has no algorithm for {}", what);
  out->algo = res[0].algo;
  for (int i = 0; i < found && found > 1; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS) out->candidates.push_back(res[i].algo);
  if (out->candidates.size() < 2) {
    out->candidates.clear();
    PlanStore::current().put(entry, algo_to_hex(out->algo));
  }
  out->pending.store(!out->candidates.empty());
  return Status::Ok();
}

void tune(AlgoChoice* c, ExecContext& ctx, const std::string& entry,
          const std::function<bool(const cublasLtMatmulAlgo_t&)>& launch, const std::string& label) {
  if (!c->pending.load()) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(ctx.stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;  // the first candidate runs meanwhile; a later eager call times them
  }
  std::vector<cublasLtMatmulAlgo_t> cands;
  cands.swap(c->candidates);
  c->pending.store(false);
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    cudaGetLastError();
    if (start) cudaEventDestroy(start);
    return;
  }
  constexpr int kRuns = 3;
  float best_ms = 0, first_ms = 0;
  size_t best = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!launch(cands[i])) continue;  // warm-up; a candidate that cannot run is skipped
    bool ok = cudaEventRecord(start, ctx.stream) == cudaSuccess;
    for (int r = 0; r < kRuns && ok; ++r) ok = launch(cands[i]);
    ok = ok && cudaEventRecord(stop, ctx.stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess;
    float ms = 0;
    if (!ok || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (i == 0) first_ms = ms;
    if (best_ms == 0 || ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (best_ms == 0) return;
  c->algo = cands[best];
  PlanStore::current().put(entry, algo_to_hex(c->algo));
  GPUOPT_LOG(debug, "cuBLASLt {}: candidate {} of {} ({:.1f} us; the first {:.1f} us)", label, best, cands.size(),
             1e3 * best_ms / kRuns, 1e3 * first_ms / kRuns);
}

}  // namespace gpuopt::cuda::lt
