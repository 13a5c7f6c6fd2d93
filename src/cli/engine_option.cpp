#include "cli/engine_option.h"

#include "cli/command.h"
#include "core/env.h"
#include "core/table.h"

namespace gpuopt::cli {

CLI::Option* add_precision_option(CLI::App* cmd, std::string* out, const std::string& help) {
  return cmd->add_option("--precision", *out, help)->check(one_of(kPrecisions));
}

CLI::Option* add_precision_option(CLI::App* cmd, std::vector<std::string>* out, const std::string& help) {
  return cmd->add_option("--precision", *out, help)->check(one_of(kPrecisions));
}

CLI::Option* add_memory_limit_option(CLI::App* cmd, size_t* out, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "--memory-limit",
          [out](const std::string& text) {
            const auto bytes = parse_byte_size(text);
            if (!bytes || *bytes == 0)
              throw CLI::ValidationError("--memory-limit",
                                         "'" + text + "': expected a number of bytes above 0, such as 512M or 2G");
            *out = *bytes;
          },
          help)
      ->type_name("BYTES");
}

CLI::Option* add_cache_dir_option(CLI::App* cmd, std::string* out, const std::string& help) {
  return cmd->add_option("--cache-dir", *out, help)->type_name("DIR");
}

CLI::Option* add_kernel_option(CLI::App* cmd, std::vector<std::pair<std::string, std::string>>* out) {
  return cmd
      ->add_option_function<std::vector<std::string>>(
          "--kernel",
          [out](const std::vector<std::string>& items) {
            for (const std::string& item : items) {
              const size_t eq = item.find('=');
              if (eq == std::string::npos || eq == 0)
                throw CLI::ValidationError("--kernel", "'" + item + "': expected NAME=VALUE, such as "
                                                                    "GPUOPT_ATTENTION_KERNEL=cudnn");
              KernelSettings probe;
              if (Status st = probe.set(item.substr(0, eq), item.substr(eq + 1)); !st.ok())
                throw CLI::ValidationError("--kernel", st.message());
              out->emplace_back(item.substr(0, eq), item.substr(eq + 1));
            }
          },
          "A kernel or pass setting, NAME=VALUE (repeatable): the GPUOPT_* variables of docs/environment.md "
          "(GPUOPT_DISABLE_FUSION=gelu, GPUOPT_ATTENTION_KERNEL=cudnn, ...); over the environment's value")
      ->type_name("NAME=VALUE");
}

void add_engine_flags(CLI::App* cmd, EngineFlags* f, unsigned which) {
  if (which & kPrecisionFlag)
    add_precision_option(cmd, &f->precision,
                         "fp32, fp16, bf16, int8 (a Q/DQ model: gpuopt quantize; run calibrates a float model) or fp8 "
                         "(a model with Fp8Gemm nodes; run calibrates a float model)");
  if (which & kMemoryLimitFlag)
    add_memory_limit_option(cmd, &f->memory_limit, "Cap on device memory for the run's tensors, e.g. 2G");
  if (which & kCacheDirFlag)
    add_cache_dir_option(cmd, &f->cache_dir,
                         "CUDA plan cache: keep each shape's algorithm and fusion choices in DIR for the next start "
                         "(default: $GPUOPT_CACHE_DIR)");
  if (which & kKernelFlag) add_kernel_option(cmd, &f->kernels);
}

Result<EngineOptions> engine_options(const EngineFlags& f, const Device& device) {
  EngineOptions o;
  o.device = device;
  GPUOPT_ASSIGN_OR_RETURN(o.precision, parse_precision(f.precision));
  o.memory_limit = f.memory_limit;
  o.cache_dir = f.cache_dir.empty() ? env_get("GPUOPT_CACHE_DIR").value_or("") : f.cache_dir;
  GPUOPT_ASSIGN_OR_RETURN(o.kernels, KernelSettings::from_env());
  for (const auto& [name, value] : f.kernels) GPUOPT_RETURN_IF_ERROR(o.kernels.set(name, value));
  return o;
}

SessionOptions session_options(const EngineOptions& o) {
  SessionOptions so;
  so.device = o.device;
  so.precision = std::string(precision_name(o.precision));
  so.optimize = o.optimize;
  so.memory_limit = o.memory_limit;
  so.cuda_graphs = o.cuda_graphs;
  so.cache_dir = o.cache_dir;
  so.kernels = o.kernels;
  return so;
}

}  // namespace gpuopt::cli
