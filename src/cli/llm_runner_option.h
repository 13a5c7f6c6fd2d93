// The options that choose and size a language-model runner, shared by `gpuopt generate` and
// `gpuopt perplexity`: --device, --precision, --gpu-memory-utilization, --no-cuda-graphs,
// --quant-kernels and --kv-cache-dtype (which `gpuopt serve` adds through add_kv_cache_dtype_option). Parsed once here; make_llm_runner builds the CPU (fp32) or CUDA runner.
//
//   LlmRunnerFlags f;
//   add_llm_runner_options(cmd, &f);
//   ...
//   GPUOPT_RETURN_IF_ERROR(check_llm_runner_flags(f));       // --precision fp16 needs --device cuda
//   RunnerOptions ro = runner_options(f, cfg);               // then set max_batch, max_step_tokens, num_kv_blocks
//   GPUOPT_ASSIGN_OR_RETURN(auto runner, make_llm_runner(f, cfg, *ck, ro));
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/device.h"
#include "llm/runner.h"

namespace gpuopt::cli {

struct LlmRunnerFlags {
  Device device = Device::cpu();
  std::string precision;  // empty: fp32 on the CPU, the checkpoint's dtype on CUDA
  double gpu_memory_utilization = 0.9;
  bool no_cuda_graphs = false;
  bool quant_kernels = false;
  std::string kv_cache_dtype = "auto";  // llm/kv_cache.h's names
};

void add_llm_runner_options(CLI::App* cmd, LlmRunnerFlags* f);
// --kv-cache-dtype auto|fp16|fp8|fp8_e4m3 into *value (a bad value: usage error naming the flag).
CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, std::string* value);
// A usage error when --precision asks the CPU runner for anything but fp32.
Status check_llm_runner_flags(const LlmRunnerFlags& f);
// A subcommand's callback: check_llm_runner_flags (exit 2), then `run` (exit 0 or 1).
void run_llm_command(const LlmRunnerFlags& f, const std::function<Status()>& run);
DType llm_compute_dtype(const LlmRunnerFlags& f, const llm::LlmConfig& cfg);
llm::RunnerOptions runner_options(const LlmRunnerFlags& f, const llm::LlmConfig& cfg);
Result<std::unique_ptr<llm::ModelRunner>> make_llm_runner(const LlmRunnerFlags& f, const llm::LlmConfig& cfg,
                                                          const llm::Checkpoint& ck, const llm::RunnerOptions& ro);

}  // namespace gpuopt::cli
