// cuBLASLt algorithm choice shared by the float matmul plans (matmul_lt.cpp) and the quantized
// GEMMs (ops/quant/cuda/fp8_gemm.cpp, int8_gemm.cpp): the plan cache's algorithm for the shape
// when cuBLASLt still accepts it, else the heuristic's first answer plus more candidates (8 in all;
// GPUOPT_MATMUL_CANDIDATES sets 1..64),
// timed on the shape's first eager run (never inside a stream capture) and the fastest kept and
// recorded in the plan cache. GPUOPT_MATMUL_AUTOTUNE=0 keeps the first answer, timing nothing.
//
//   lt::AlgoChoice c;
//   GPUOPT_RETURN_IF_ERROR(lt::choose(ctx, {op, la, lb, lc, ld}, ws, "fp8gemm " + key, true, "fp8 m=..", &c));
//   ...per call, under the caller's lock, with the call's own buffers:
//   if (c.pending.load()) lt::tune(&c, ctx, entry, [&](const cublasLtMatmulAlgo_t& a) { return launch(a); }, label);
#pragma once

#include "backends/cuda/cuda_ops.h"

#include <cublasLt.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace gpuopt::cuda::lt {

// How many of the heuristic's answers a tunable shape times under ctx's KernelSettings:
// GPUOPT_MATMUL_CANDIDATES (default 8, 1..kMaxCandidates), 1 with GPUOPT_MATMUL_AUTOTUNE=0. The
// float plans' key includes it, so sessions that differ here choose their own algorithms.
constexpr int kMaxCandidates = 64;
int candidates(const ExecContext& ctx);

// The algorithm (an opaque struct of 64-bit words, valid for the same cuBLASLt version and GPU,
// which the plan cache file's header pins) as hex, and back.
std::string algo_to_hex(const cublasLtMatmulAlgo_t& a);
bool algo_from_hex(const std::string& text, cublasLtMatmulAlgo_t* a);

struct Descs {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c, d;
};

struct AlgoChoice {
  cublasLtMatmulAlgo_t algo{};
  // The heuristic's candidates, timed by tune() on the first eager call (then cleared); empty when
  // the plan cache gave the algorithm, tuning is off or there was one candidate.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  std::atomic<bool> pending{false};  // candidates wait to be timed (may be read without the lock)
};

// Chooses the algorithm for `d` within `workspace` bytes: the plan store's value under `entry`
// if cuBLASLt accepts it here, else the heuristic's (up to candidates(ctx) answers when `tunable`;
// a single answer is recorded at once). No algorithm: Unimplemented, naming
// `what`.
Status choose(ExecContext& ctx, const Descs& d, size_t workspace, const std::string& entry, bool tunable,
              const std::string& what, AlgoChoice* out);

// Times the pending candidates through `launch` (one warm-up, then 3 runs between events on
// ctx.stream; a candidate whose launch fails is skipped), keeps the fastest in out->algo and
// records it under `entry`. Inside a stream capture it does nothing (the candidates stay pending
// and out->algo runs meanwhile). The caller serializes calls for one choice and makes `launch`
// write only buffers the real call then overwrites.
void tune(AlgoChoice* c, ExecContext& ctx, const std::string& entry,
          const std::function<bool(const cublasLtMatmulAlgo_t&)>& launch, const std::string& label);

}  // namespace gpuopt::cuda::lt
