// The engine options every ONNX subcommand takes alike, defined once: --precision (one list of
// precisions, parsed into the engine's Precision), --memory-limit (bytes), --cache-dir (the CUDA
// plan cache; default $GPUOPT_CACHE_DIR) and --kernel NAME=VALUE (a kernel or pass setting of
// KernelSettings, by its GPUOPT_* name; repeatable; default: that variable). --device is
// cli/device_option.h. A bad value is a usage error naming the option (exit 2), the same message
// in every subcommand; engine_options() fills EngineOptions from them once, the environment
// supplying only what the command line did not give.
//
//   EngineFlags f;
//   add_engine_flags(cmd, &f, kPrecisionFlag | kKernelFlag);          // the standard help texts
//   ...
//   GPUOPT_ASSIGN_OR_RETURN(EngineOptions eo, engine_options(f, device));
//   SessionOptions so = session_options(eo);
#pragma once

#include "engine/compile.h"
#include "gpuopt/session.h"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuopt::cli {

// What a Session takes (SessionOptions::precision, engine/compile.h Precision).
inline const std::vector<std::string> kPrecisions = {"fp32", "fp16", "bf16", "int8", "fp8"};

CLI::Option* add_precision_option(CLI::App* cmd, std::string* out, const std::string& help);
CLI::Option* add_precision_option(CLI::App* cmd, std::vector<std::string>* out, const std::string& help);
CLI::Option* add_memory_limit_option(CLI::App* cmd, size_t* out, const std::string& help);
CLI::Option* add_cache_dir_option(CLI::App* cmd, std::string* out, const std::string& help);
// --kernel NAME=VALUE, checked against KernelSettings when the command line is read.
CLI::Option* add_kernel_option(CLI::App* cmd, std::vector<std::pair<std::string, std::string>>* out);

// The engine flags' values as given (empty / 0: not given).
struct EngineFlags {
  std::string precision = "fp32";
  size_t memory_limit = 0;
  std::string cache_dir;
  std::vector<std::pair<std::string, std::string>> kernels;  // --kernel NAME=VALUE, in order
};
enum EngineFlag : unsigned { kPrecisionFlag = 1, kMemoryLimitFlag = 2, kCacheDirFlag = 4, kKernelFlag = 8 };
// Adds the chosen flags with their standard help texts.
void add_engine_flags(CLI::App* cmd, EngineFlags* flags, unsigned which);

// EngineOptions for `device` from the flags: the precision parsed, the kernel settings of the
// environment with each --kernel applied over them, --cache-dir or else $GPUOPT_CACHE_DIR.
Result<EngineOptions> engine_options(const EngineFlags& flags, const Device& device);
// The same as a Session's options (device, precision, memory limit, plan cache, kernel settings).
SessionOptions session_options(const EngineOptions& options);

}  // namespace gpuopt::cli
