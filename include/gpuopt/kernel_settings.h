// gpuopt::KernelSettings — the kernel and pass choices of one session (the A/B switches such as
// GPUOPT_ATTENTION_KERNEL or GPUOPT_DISABLE_FUSION), typed, and parsed and validated here alone.
// The environment only supplies defaults: from_env() reads every GPUOPT_* variable of the table
// (docs/environment.md); a session given its own settings ignores the environment for them, so
// two sessions of one process can differ. The settings reach the passes, the backend's kernels
// (CUDA: through each execution context) and the plan cache's key.
//
//   GPUOPT_ASSIGN_OR_RETURN(gpuopt::KernelSettings ks, gpuopt::KernelSettings::from_env());
//   GPUOPT_RETURN_IF_ERROR(ks.set("GPUOPT_ATTENTION_KERNEL", "cudnn"));  // or ks.attention_kernel = ...
//   gpuopt::SessionOptions so;
//   so.kernels = ks;                                  // unset: KernelSettings::from_env() at load
//
// A bad value is one error naming the variable and its allowed values:
//   GPUOPT_FA_WARPS='6': expected auto, 4 or 8
#pragma once

#include "core/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

struct KernelSettings {
  // --- kernels (CUDA) ---
  // GPUOPT_SDPA_BIAS: a [B,1,1,S] mask copied per call (expand), read in place with a zero row
  // stride (broadcast), or copied even when already laid out (copy).
  enum class SdpaBias : uint8_t { kExpand, kBroadcast, kCopy };
  SdpaBias sdpa_bias = SdpaBias::kExpand;
  bool sdpa_autotune = false;  // GPUOPT_SDPA_AUTOTUNE
  enum class SdpaNanGuard : uint8_t { kCudnn, kPass };
  SdpaNanGuard sdpa_nan_guard = SdpaNanGuard::kCudnn;  // GPUOPT_SDPA_NAN_GUARD
  int fa_warps = 0;  // GPUOPT_FA_WARPS: 0 (auto), 4 or 8
  enum class AttentionKernel : uint8_t { kAuto, kCudnn, kFa, kWmma, kScalar };
  AttentionKernel attention_kernel = AttentionKernel::kAuto;  // GPUOPT_ATTENTION_KERNEL
  bool int8_conv_autotune = true;                             // GPUOPT_INT8_CONV_AUTOTUNE
  bool int8_conv1x1 = true;                                   // GPUOPT_INT8_CONV1X1
  enum class ConvEngine : uint8_t { kLegacy, kGraph };
  ConvEngine conv_engine = ConvEngine::kLegacy;  // GPUOPT_CONV_ENGINE
  enum class ConvGemm : uint8_t { kOff, kTimed, kForce };
  ConvGemm conv_gemm = ConvGemm::kTimed;  // GPUOPT_CONV_GEMM: 0, 1, force
  enum class Depthwise : uint8_t { kAuto, kSmem, kTiles, kNarrow, kWide, kWide1, kCudnn };
  Depthwise depthwise = Depthwise::kAuto;  // GPUOPT_DEPTHWISE_KERNEL
  enum class PoolKernel : uint8_t { kOurs, kCudnn };
  PoolKernel pool_kernel = PoolKernel::kOurs;  // GPUOPT_POOL_KERNEL
  bool small_c_transpose = true;               // GPUOPT_SMALL_C_TRANSPOSE
  int matmul_candidates = 8;                   // GPUOPT_MATMUL_CANDIDATES: 1..kMaxMatmulCandidates
  bool matmul_autotune = true;                 // GPUOPT_MATMUL_AUTOTUNE
  bool fp8_fast_accum = false;                 // GPUOPT_FP8_FAST_ACCUM
  enum class Fp8E4m3Out : uint8_t { kAuto, kBf16, kStaged };
  Fp8E4m3Out fp8_e4m3_out = Fp8E4m3Out::kAuto;  // GPUOPT_FP8_E4M3_OUT

  // --- passes and memory ---
  // GPUOPT_DISABLE_FUSION's text ("", "1", "all", "attention,gelu", "+int8_residual"), checked
  // against the fusion table when set; the pass pipeline reads it (passes/passes.h FusionSwitches).
  std::string disable_fusion;
  bool int8_conv = true;  // GPUOPT_INT8_CONV
  // GPUOPT_MEMORY_PLAN; kDefault: the backend's own (static on the CPU, pool on CUDA).
  enum class MemoryPlan : uint8_t { kDefault, kStatic, kPool };
  MemoryPlan memory_plan = MemoryPlan::kDefault;

  static constexpr int kMaxMatmulCandidates = 64;

  // The built-in defaults, each overridden by its GPUOPT_* variable where set (non-empty); the
  // first bad value is the error.
  static Result<KernelSettings> from_env();
  // `given` when set, else from_env(): what a session that was given no settings uses.
  static Result<KernelSettings> or_env(const std::optional<KernelSettings>& given);
  // Sets one setting by its variable's name and text (the syntax of the environment variable).
  // InvalidArgument "NAME='VALUE': expected ..." for a bad value, or for a name not in names().
  Status set(std::string_view name, std::string_view value);
  // The current value of one setting as text (set() takes it back); "" for an unknown name.
  std::string get(std::string_view name) const;
  // Every setting's variable name, in a fixed order.
  static const std::vector<std::string_view>& names();
  // Every setting as "NAME=value;..." in names() order: the plan cache's key part, so a cache
  // written under other settings is not reused.
  std::string key() const;
  bool operator==(const KernelSettings&) const = default;
};

}  // namespace gpuopt
