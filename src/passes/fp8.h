// The fp8 rewrite (--precision fp8, fp8_gemm.cpp): on a float (f32) graph after the default
// passes, each GEMM with a constant weight becomes one ai.gpuopt Fp8Gemm (ops/quant/fp8_gemm.cpp)
// with per-tensor e4m3 scales: the weight's amax / 448, computed here, and the activation's
// amax / 448 from calibration (quant/fp8.h runs it). Matched:
//
//   MatMul(A, W const f32 [K, N])                              -> Fp8Gemm(A, e4m3(W^T))
//   Gemm(A [M, K], W const, C const [N]) transA 0, alpha/beta 1 -> Fp8Gemm(A, e4m3(W or W^T), C)
//   FusedGemm (com.microsoft) as Gemm, activation Relu/Gelu   -> Fp8Gemm(..., activation, approximate)
//
// K and N must be multiples of 16 (cuBLASLt's fp8 alignment); other GEMMs, and those whose
// activation has no calibrated amax, stay in float (fp16 on the GPU) and are listed in `kept`.
//
// With `chain`, an Fp8Gemm whose output reaches input A of an Fp8Gemm with a bias through
// Reshapes only (each its value's one reader besides Shape nodes, none a graph output) writes that A in e4m3 itself
// (y_scale = the reader's a_scale): BERT's FFN up-projection (+ Gelu) feeding the down-projection
// skips a quantize pass and an f16 round trip of its [tokens, 3072] output. And Fp8Gemms that
// read one activation with one a_scale (BERT's Q, K and V projections) quantize it once: the
// first writes the e4m3 codes as its second output, the others (those with a bias) read them.
//
// With `norm`, a SkipLayerNormalization whose output is input A of Fp8Gemms with a bias (BERT's
// Q, K and V after one residual LayerNorm, the FFN's up-projection after the other) writes the
// e4m3 codes of its output itself (its output 4, attribute fp8_scale = their a_scale:
// ops/norm/skip_layernorm.cpp) beside the float output the residual still reads, and those
// Fp8Gemms read the codes: no quantize pass over the normalised rows. GPUOPT_DISABLE_FUSION=fp8_norm.
//
// Lone GEMMs: an Fp8Gemm whose input no producer writes in e4m3 (after the norm copies, chains
// and shared inputs) runs a quantize pass of its own over that input (BERT's attention output
// projection, behind the attention kernel; the pooler). Where the N of the GEMMs reading that one
// quantized copy add up to less than lone_min_n, the pass costs more than the e4m3 GEMM saves
// against fp16, so they stay in float (listed in `kept`). Decided on dry rewrites (shapes only),
// repeated while a kept GEMM leaves another lone. GPUOPT_DISABLE_FUSION=fp8_lone converts them.
//
//   auto names = fp8_activation_tensors(g);            // calibrate these (f32 runs of g)
//   GPUOPT_ASSIGN_OR_RETURN(Fp8Stats st, rewrite_fp8(&g, amax_by_name));
#pragma once

#include "core/status.h"
#include "ir/graph.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuopt {

struct Fp8Stats {
  int rewritten = 0;               // GEMMs now Fp8Gemm
  int chained = 0;                 // of them, writing the next one's e4m3 input
  int shared = 0;                  // of them, reading a sibling's e4m3 copy of their input
  int normed = 0;                  // SkipLayerNormalizations writing their readers' e4m3 input
  std::vector<std::string> kept;   // "node 'x': reason" for GEMMs with a constant weight left in float
};

// The activation inputs of the GEMMs rewrite_fp8 can rewrite (those whose shapes qualify).
std::vector<std::string> fp8_activation_tensors(const Graph& g);

// Rewrites the qualifying GEMMs; `act_amax` maps an activation's value name to its amax.
// lone_min_n > 0 keeps the lone GEMMs below it in float (above; quant::fp8_on_graph passes
// kFp8LoneMinN unless GPUOPT_DISABLE_FUSION=fp8_lone).
Result<Fp8Stats> rewrite_fp8(Graph* g, const std::map<std::string, double>& act_amax, bool chain = true,
                             bool norm = true, int64_t lone_min_n = 0);

// Below this total N a lone GEMM stays fp16. From the H200's BERT-base b256 profile: a quantize
// pass costs ~1.5 ps per input element (3 bytes at ~2 TB/s), e4m3 saves 2 N (1/741 - 1/950) ps
// per input element (f16 GEMMs at ~741 TFLOP/s, FP8 at ~950): even at N ~ 2,500.
inline constexpr int64_t kFp8LoneMinN = 2048;

// The per-tensor scale for an amax: amax / 448, or 1 for an all-zero tensor.
float fp8_scale(double amax);

}  // namespace gpuopt
