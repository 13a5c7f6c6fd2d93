// The engine options every ONNX subcommand takes alike (run, inspect, profile, serve, tune):
// --precision (one list of precisions, checked here) and --memory-limit (bytes, parsed here).
// A bad value is a usage error naming the option (exit 2), the same message in every subcommand.
//
//   add_precision_option(cmd, &o->precision, "...");        // std::string, one of kPrecisions
//   add_memory_limit_option(cmd, &o->memory_limit, "...");  // size_t bytes, 0 when not given
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::cli {

// What a Session takes (SessionOptions::precision, passes/pipeline.cpp).
inline const std::vector<std::string> kPrecisions = {"fp32", "fp16", "bf16", "int8", "fp8"};

CLI::Option* add_precision_option(CLI::App* cmd, std::string* out, const std::string& help);
CLI::Option* add_precision_option(CLI::App* cmd, std::vector<std::string>* out, const std::string& help);
CLI::Option* add_memory_limit_option(CLI::App* cmd, size_t* out, const std::string& help);

}  // namespace gpuopt::cli
