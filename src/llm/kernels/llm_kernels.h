// The CUDA kernels of the language-model runner (src/llm/cuda/), one family per .cu file here.
// Every pointer is device memory; every launch is asynchronous on `stream` and capturable in a
// CUDA graph (sizes that change between replays are read from device memory, never baked in).
// `dt` is the activation/weight dtype: DType::F16, BF16 or F32 (F32 for exact checks against the
// CPU runner). Paged KV layout (kv_cache.h): per layer K and V each
// [num_blocks, block_size, num_kv_heads, head_dim] in `kv_dt` (kKvFp8: e4m3 codes).
#pragma once

#include <cstdint>

#include "core/dtype.h"

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::llm::cuda {

// kv_dt of an FP8 cache (DType has no e4m3 type): one byte per element, e4m3(K / k_scale) and
// e4m3(V / v_scale) (round to nearest even, saturating at 448), read back times the scale.
constexpr DType kKvFp8 = DType::U8;

// out[t, :] = table[tokens[t], :]   (tokens: int32 [T], table: [vocab, hidden])
void embedding(const int32_t* tokens, const void* table, void* out, int64_t T, int64_t hidden,
               DType dt, cudaStream_t stream);

// With residual == nullptr: out = rmsnorm(x) * weight.
// With residual: residual += x (in place, the new residual stream), out = rmsnorm(residual) * weight.
// Sum of squares in f32. x, residual, out: [rows, dim]; weight: [dim].
void rms_norm(const void* x, void* residual, const void* weight, void* out, int64_t rows,
              int64_t dim, float eps, DType dt, cudaStream_t stream);

// qkv: [T, (num_heads + 2*num_kv_heads) * head_dim] (q | k | v per token, the fused projection's
// output, bias already added). Rotates q and k in place, Hugging Face's rotate_half convention
// (pairs (i, i + head_dim/2)), angle = positions[t] * inv_freq[i] (inv_freq: f32 [head_dim/2],
// rope scaling already applied); then writes k and v of token t into slot slot_mapping[t] =
// block * block_size + offset of every layer-local cache (slot < 0: not written); kv_dt kKvFp8:
// e4m3(k / k_scale), e4m3(v / v_scale) (the scales are unused otherwise).
void rope_and_cache(void* qkv, const int32_t* positions, const float* inv_freq,
                    const int32_t* slot_mapping, void* k_cache, void* v_cache, int64_t T,
                    int num_heads, int num_kv_heads, int head_dim, int block_size, DType dt,
                    DType kv_dt, cudaStream_t stream, float k_scale = 1.0f, float v_scale = 1.0f);

struct PagedAttentionArgs {
  const void* q = nullptr;        // [T, q_stride] rows; head h at column h*head_dim
  int64_t q_stride = 0;           // elements between tokens (the fused qkv row length)
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;            // [T, num_heads * head_dim]
  const int32_t* query_start = nullptr;   // [num_seqs + 1]: seq s owns rows query_start[s]..[s+1]
  const int32_t* context_lens = nullptr;  // [num_seqs]: tokens cached for s, this step's included
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int num_seqs = 0;               // may exceed the seqs in use in a graph: rows with
                                  // query_start[s] == query_start[s+1] do nothing
  int max_blocks_per_seq = 0;
  int max_query_len = 0;          // upper bound of the per-seq query lengths (1 for decode)
  int64_t max_context = 0;        // upper bound of context_lens (sizes the split over the context)
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 0;                // 1/sqrt(head_dim)
  int sliding_window = 0;         // 0: none
  DType dt = DType::F16, kv_dt = DType::F16;  // kv_dt: dt, or kKvFp8
  float k_scale = 1.0f, v_scale = 1.0f;        // kKvFp8: the layer's cache scales
  void* workspace = nullptr;      // split-context partials (paged_attention_workspace_bytes)
};
// Causal attention of each query row over its sequence's cached keys: query row i of seq s sits at
// position context_lens[s] - (query_start[s+1]-query_start[s]) + i and sees positions <= its own
// (and, with sliding_window W > 0, positions > its own - W). Grouped-query: head h reads kv head
// h / (num_heads / num_kv_heads). Softmax in f32.
// Supported: head_dim 64 or 128, kv_dt == dt or kKvFp8, num_heads / num_kv_heads <= 16, any
// block_size >= 1. An FP8 cache runs every step on the CUDA-core kernel (K/V converted as they
// leave shared memory; k_scale folded into the queries, v_scale into the output).
// Decode (max_query_len == 1) splits long contexts over several CTAs and reduces the partials in
// `workspace`; with workspace == nullptr it does not split (correct, slower at small batch).
void paged_attention(const PagedAttentionArgs& a, cudaStream_t stream);
// nullptr when `a` is supported, else why not (one line); checked at load time by the runner.
const char* paged_attention_unsupported(const PagedAttentionArgs& a);
// Workspace for any launch with num_seqs * max_query_len <= max_tokens, num_heads and
// max_context <= these (0 when no launch of that size splits).
size_t paged_attention_workspace_bytes(int max_tokens, int num_heads, int head_dim,
                                       int64_t max_context);

// Decode-sized products: y[T, N] = x[T, K] · W[N, K]^T (+ bias[N]), T <= kGemvMaxTokens, f16 or
// bf16 in and out with f32 accumulation, x and W 16-byte aligned with K % 8 == 0 (rows contiguous).
// Deterministic (fixed reduction order). The runner's GEMM tuner races it against cuBLASLt.
constexpr int kGemvMaxTokens = 8;
bool gemv_supported(const void* x, const void* w, const void* y, int64_t T, int64_t N, int64_t K,
                    DType dt);
void gemv(const void* x, const void* w, const void* bias, void* y, int64_t T, int64_t N, int64_t K,
          DType dt, cudaStream_t stream);

// Weight-only quantized linears in GPTQ's layout (AWQ checkpoints are repacked to it):
// qweight int32 [K*bits/32, N] packed along K (value j of word [r][n] is row r*32/bits + j, bits
// bits*j..), qzeros int32 [groups, N*bits/32] packed along N, scales [groups, N] in the activation
// dtype, g_idx int32 [K] (act-order) or nullptr (group = k / group_size). W[n][k] =
// scale[g][n] * (q - zero), zero + 1 when zero_minus_one (GPTQ v1 checkpoints).
struct QuantWeightArgs {
  const int32_t* qweight = nullptr;
  const int32_t* qzeros = nullptr;
  const void* scales = nullptr;
  const int32_t* g_idx = nullptr;
  int bits = 4;  // 4 or 8
  int64_t group_size = 128;  // a multiple of 8 dividing K (unused with g_idx)
  bool zero_minus_one = true;
};
// The split-K workspace of gemv_quant: f32 partial sums (slices x T x N) and one arrival counter
// per 128 output columns, zeroed once when allocated (every launch leaves them zero). One stream
// at a time uses a workspace.
struct GemvSplitScratch {
  float* partial = nullptr;
  size_t partial_floats = 0;
  int* counters = nullptr;
  int64_t num_counters = 0;
};
// y[T, N] = x[T, K] · W^T (+ bias), T <= kQuantGemvMaxTokens, f16/bf16, dequantized in registers,
// f32 accumulation, deterministic. N a multiple of 32/bits. Each dequantized word serves all T
// tokens. Three kernels, the first that applies of:
//   Mma:    f16, no act-order, group a multiple of 32 (int4) / 16 (int8): (q - z) in f16 by the
//           magic-number trick, tensor cores (mma.sync) for all T tokens at once, the group scale
//           once per group (gemv_quant_mma.cu);
//   Wide:   no act-order: 16-byte loads of 4 columns per lane, f32 FMAs per token
//           (gemv_quant_wide.cu);
//   Column: anything supported (act-order): one column per lane.
// Both split K over CTAs when given a workspace. `kernel` Auto takes GPUOPT_LLM_QUANT_GEMV
// (mma | wide | column: the first kernel tried) or else Mma; returns the kernel that ran.
constexpr int kQuantGemvMaxTokens = 16;
enum class QuantGemvKernel { Auto, Mma, Wide, Column };
bool gemv_quant_supported(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt);
QuantGemvKernel gemv_quant(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                           int64_t K, DType dt, cudaStream_t stream, const GemvSplitScratch* split = nullptr,
                           QuantGemvKernel kernel = QuantGemvKernel::Auto);
// The kernel Auto stands for (GPUOPT_LLM_QUANT_GEMV, read once), and whether the Mma kernel runs
// for these arguments.
QuantGemvKernel quant_gemv_default_kernel();
bool gemv_quant_mma_runs(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt,
                         const GemvSplitScratch* split);
// W as [N, K] row-major in dt (f16/bf16): the larger-T path dequantizes into a scratch matrix and
// runs the ordinary GEMM on it.
void dequantize_weight(const QuantWeightArgs& w, void* out, int64_t N, int64_t K, DType dt,
                       cudaStream_t stream);

// FP8 (e4m3) activations for W8A8: row t of x scaled by row_scale[t] = max|x[t]| / 448 (dynamic,
// per token) or *static_scale (a checkpoint's input_scale), xq = e4m3(x / scale), saturating.
void fp8_quantize_rows(const void* x, int64_t T, int64_t K, DType dt, const float* static_scale,
                       void* xq, float* row_scale, cudaStream_t stream);
// y[t, n] = acc[t, n] * row_scale[t] * w_scale[per_channel ? n : 0] (+ bias[n]), acc the
// product of the e4m3 operands in f32 (or bf16, acc_dt, where cuBLASLt has no f32 output).
void fp8_scale_output(const void* acc, DType acc_dt, const float* row_scale, const float* w_scale,
                      bool per_channel, const void* bias, void* y, int64_t T, int64_t N, DType dt,
                      cudaStream_t stream);

// W8A16 for FP8 weights at decode: y[T, N] = x[T, K] · (e4m3 W[N, K] * w_scale)^T (+ bias),
// w_scale [N] (per_channel) or [1], T <= kQuantGemvMaxTokens, f16/bf16 x and y, x and W 16-byte
// aligned, K % 16 == 0. Weights converted exactly in registers, f32 products and accumulation,
// deterministic; `split`: the workspace for K split over CTAs (may be null: one slice).
bool gemv_fp8_supported(const void* x, const void* w, int64_t T, int64_t N, int64_t K, DType dt);
void gemv_fp8(const void* x, const void* w, const float* w_scale, bool per_channel, const void* bias, void* y,
              int64_t T, int64_t N, int64_t K, DType dt, cudaStream_t stream, const GemvSplitScratch* split = nullptr);

// gate_up: [T, 2*inter] (gate | up); out: [T, inter] = silu(gate) * up.
void silu_mul(const void* gate_up, void* out, int64_t T, int64_t inter, DType dt,
              cudaStream_t stream);

// out[i, :] = x[rows[i], :]: the hidden states of the positions that are sampled.
void gather_rows(const void* x, const int32_t* rows, void* out, int64_t n, int64_t dim, DType dt,
                 cudaStream_t stream);

// --- Sampling (the GPU side of sampling.h's contract) ---

// Greedy: tokens[r] = argmax of logits[r, :] (lowest id on ties), logprobs[r] (nullable) = its
// log-softmax. logits: f32 [n, vocab] with row stride ld (>= vocab).
void argmax_rows(const float* logits, int64_t n, int64_t vocab, int64_t ld, int32_t* tokens,
                 float* logprobs, cudaStream_t stream);

// Per-row sampling parameters in device memory (so a captured graph replays with new ones).
struct SampleRowParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax of the penalised logits)
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;         // <= 0: off
  int32_t pad = 0;
  uint64_t seed = 0;
  uint64_t counter_hi = 0;   // philox_uniform(seed, counter_hi, counter_lo): (step, seq index)
  uint64_t counter_lo = 0;
};

// sampling.h's order of operations per row r: penalties (when output_counts / prompt_mask are
// given: int32 [n, vocab] occurrences in the output so far, uint8 [n, vocab] 1 = in the prompt),
// then temperature <= 0 -> argmax; else softmax(logits / temperature), keep the prefix of the
// tokens sorted by (probability desc, id asc) that top-k, top-p (smallest prefix whose mass
// reaches top_p of the top-k mass) and min-p (prob >= min_p * max prob) allow, and draw
// u = philox_uniform(seed, counter_hi, counter_lo) in [0, 1): the first kept token (same order)
// whose cumulative mass exceeds u * kept mass. logprobs[r] (nullable): log-softmax of the RAW
// logits at the chosen token. One CTA per row; logits are not modified.
void sample_rows(const float* logits, int64_t n, int64_t vocab, int64_t ld,
                 const SampleRowParams* params, const int32_t* output_counts,
                 const uint8_t* prompt_mask, int32_t* tokens, float* logprobs,
                 cudaStream_t stream);

}  // namespace gpuopt::llm::cuda
