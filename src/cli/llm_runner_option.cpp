#include "cli/llm_runner_option.h"

#include "cli/command.h"
#include "cli/device_option.h"
#include "llm/kv_cache.h"

namespace gpuopt::cli {

void add_llm_runner_options(CLI::App* cmd, LlmRunnerFlags* f) {
  add_device_option(cmd, &f->device, "cpu (fp32 reference runner) or cuda / cuda:N");
  cmd->add_option("--precision", f->precision,
                  "fp32, fp16 or bf16 (CUDA; default: the checkpoint's torch_dtype; the CPU runs fp32)")
      ->check(one_of({"fp32", "fp16", "bf16"}));
  cmd->add_option("--gpu-memory-utilization", f->gpu_memory_utilization,
                  "CUDA: fraction of device memory for weights, activations and the KV cache (default 0.9)")
      ->check(real_range(0.01, 1));
  cmd->add_flag("--no-cuda-graphs", f->no_cuda_graphs, "CUDA: launch kernels one by one instead of replaying graphs");
  cmd->add_flag("--quant-kernels", f->quant_kernels,
                "CUDA, GPTQ/AWQ/FP8 checkpoints: keep the weights packed and run the W4A16/W8A16 or FP8 "
                "(W8A16/W8A8) kernels (default: dequantize to --precision at load)");
  add_kv_cache_dtype_option(cmd, &f->kv_cache_dtype);
}

CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, std::string* value) {
  return cmd
      ->add_option("--kv-cache-dtype", *value,
                   "KV cache element type: auto (the compute dtype), fp16, or fp8 / fp8_e4m3 (e4m3 with a per-layer "
                   "scale: half of fp16's memory per token)")
      ->check(one_of({std::begin(llm::kKvCacheDtypeNames), std::end(llm::kKvCacheDtypeNames)}));
}

Status check_llm_runner_flags(const LlmRunnerFlags& f) {
  if (!f.device.is_cuda() && !f.precision.empty() && f.precision != "fp32")
    return Status::InvalidArgument("--precision {} needs --device cuda: the CPU runner computes in fp32", f.precision);
  return Status::Ok();
}

void run_llm_command(const LlmRunnerFlags& f, const std::function<Status()>& run) {
  if (Status st = check_llm_runner_flags(f); !st.ok()) {
    set_exit_code(report_error(st, /*usage=*/true));
    return;
  }
  Status st = run();
  set_exit_code(st.ok() ? kExitOk : report_error(st));
}

DType llm_compute_dtype(const LlmRunnerFlags& f, const llm::LlmConfig& cfg) {
  if (f.precision.empty()) return f.device.is_cuda() ? cfg.dtype : DType::F32;
  return f.precision == "fp16" ? DType::F16 : f.precision == "bf16" ? DType::BF16 : DType::F32;
}

llm::RunnerOptions runner_options(const LlmRunnerFlags& f, const llm::LlmConfig& cfg) {
  llm::RunnerOptions ro;
  ro.compute_dtype = llm_compute_dtype(f, cfg);
  ro.gpu_memory_utilization = f.gpu_memory_utilization;
  ro.device_index = f.device.index;
  ro.cuda_graphs = !f.no_cuda_graphs;
  ro.quant_kernels = f.quant_kernels;
  // Checked by the option's validator: one of kKvCacheDtypeNames.
  if (auto kv = llm::parse_kv_cache_dtype(f.kv_cache_dtype); kv.ok()) ro.kv_cache_dtype = *kv;
  return ro;
}

Result<std::unique_ptr<llm::ModelRunner>> make_llm_runner(const LlmRunnerFlags& f, const llm::LlmConfig& cfg,
                                                          const llm::Checkpoint& ck, const llm::RunnerOptions& ro) {
  if (f.device.is_cuda()) return llm::make_cuda_runner(cfg, ck, ro);
  return llm::make_cpu_runner(cfg, ck, ro);
}

}  // namespace gpuopt::cli
