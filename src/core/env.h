// Every environment variable that changes gpuopt's behaviour, in one table (docs/environment.md
// lists them, checked by a test; `gpuopt info --env` prints this table). Read through env_get(); a
// variable missing here is a defect. The kernel and pass settings among them are read only by
// KernelSettings::from_env (include/gpuopt/kernel_settings.h), as a session's defaults.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

// X(NAME, default, description)
#define GPUOPT_ENV_VARS(X)                                                                                   \
  X(GPUOPT_LOG_LEVEL, "warn", "Log level: error, warn, info, debug or trace (0-4).")                          \
  X(GPUOPT_NVML_LIBRARY, "libnvidia-ml.so.1", "Path of the NVML library to dlopen (the tests point it at a fake).") \
  X(GPUOPT_DISABLE_FUSION, "0",                                                                              \
    "1 or all turns every fusion off; or a list to leave out: conv,matmul_bias,gelu,attention,nhwc.")    \
  X(GPUOPT_SDPA_BIAS, "expand", "broadcast: cuDNN's SDPA reads a [B,1,1,S] mask in place (zero row stride) instead of a copy expanded per call.") \
  X(GPUOPT_SDPA_AUTOTUNE, "0", "1: every plan cuDNN's SDPA heuristics offer is built and the fastest kept on the shape's first eager call; 0: the heuristics' first plan (A/B).") \
  X(GPUOPT_SDPA_NAN_GUARD, "cudnn", "cudnn: an Attention's nan_to_zero left to cuDNN's SDPA (no NaN pass after it; default); pass: an in-place pass after cuDNN.") \
  X(GPUOPT_FA_WARPS, "auto", "4 or 8: the flash attention kernel's warps per block (64 or 128 query rows); auto: 8 where that grid fills every SM 4 times (A/B).") \
  X(GPUOPT_ATTENTION_KERNEL, "auto", "auto: gpuopt's flash kernel for head size 64 and at most 128 keys, else cuDNN's SDPA; cudnn: cuDNN's SDPA wherever it applies; fa: gpuopt's flash kernel instead of cuDNN; wmma, scalar: those kernels (A/B).") \
  X(GPUOPT_INT8_CONV_AUTOTUNE, "1", "0: Int8Conv runs cuDNN's first heuristic plan instead of timing the candidates on a shape's first run (A/B).") \
  X(GPUOPT_INT8_CONV1X1, "1", "0: residual Int8Convs try cuDNN's residual graph (then the conv + Int8Add pair) instead of the CUTLASS sm90 GEMM for 1x1 ones and the pair for the rest (A/B).") \
  X(GPUOPT_CONV_ENGINE, "legacy", "graph: channels-last fp16/bf16 convs through cuDNN's graph API with timed engine choice (A/B, unverified).") \
  X(GPUOPT_CONV_GEMM, "1", "1x1 channels-last convs: 1 times cuDNN against one cuBLASLt GEMM (bias, residual, Relu fused) per shape and keeps the faster; 0 cuDNN only; force the GEMM (A/B).") \
  X(GPUOPT_DEPTHWISE_KERNEL, "auto", "auto/smem: gpuopt's shared-memory depthwise kernel where it applies, else its register tiles; tiles: the register tiles (narrow/wide/wide1 pick one); cudnn: cuDNN (A/B).") \
  X(GPUOPT_POOL_KERNEL, "ours", "cudnn: channels-last max pools through cuDNN's pooling where it is exact, instead of gpuopt's kernel (A/B).") \
  X(GPUOPT_SMALL_C_TRANSPOSE, "1", "0: transposes to a last axis of 2-8 elements (NCHW -> NHWC of an image) take the strided copy instead of the interleave kernel (A/B).") \
  X(GPUOPT_NUM_THREADS, "physical cores", "Threads of the CPU pool (fast backend and reference).")            \
  X(GPUOPT_SYSFS_ROOT, "/sys", "Root of the sysfs tree scanned for PCI display devices (tests use a fake tree).") \
  X(GPUOPT_PROC_ROOT, "/proc", "Root of procfs read for CPU, memory and process details (tests use a fake tree).") \
  X(GPUOPT_MEMORY_PLAN, "static on cpu, pool on cuda",                                                      \
    "static: activations at offsets in one arena per input shape (the memory plan); pool: each allocated on its own.") \
  X(GPUOPT_CACHE_DIR, "", "Plan cache directory of run and serve when --cache-dir is not given (docs/engine.md).") \
  X(GPUOPT_MATMUL_CANDIDATES, "8", "How many of cuBLASLt's heuristic answers a GEMM shape's first eager run times (1..64; A/B).") \
  X(GPUOPT_MATMUL_AUTOTUNE, "1", "0: cuBLASLt's first heuristic algorithm for each GEMM shape instead of the fastest of up to GPUOPT_MATMUL_CANDIDATES candidates, timed on the shape's first eager run (A/B).") \
  X(GPUOPT_FP8_FAST_ACCUM, "0", "1: cuBLASLt's fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) on the FP8 GEMMs of --precision fp8 (A/B).") \
  X(GPUOPT_FP8_E4M3_OUT, "auto", "An FP8 GEMM's e4m3 output: auto tries cuBLASLt with f16 C, then bf16 C, then f16 + a quantize pass; bf16 or staged start there (A/B, tests).") \
  X(GPUOPT_LLM_QUANT_GEMV, "mma", "Decode GEMV of packed int4/int8 LLM weights (--quant-kernels): mma the tensor-core kernel where it applies, wide or column the f32 ones (A/B; process-wide).") \
  X(GPUOPT_INT8_CONV, "1", "0: --precision int8 on the GPU leaves QDQ convolutions and residual adds as Q/DQ around fp16 convs instead of Int8Conv/Int8Add (docs/quantization.md).")

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};

const std::vector<EnvVar>& env_vars();
// Value of a variable from the table (asserts the name is in it); nullopt when unset or empty.
std::optional<std::string> env_get(const char* name);

}  // namespace gpuopt
