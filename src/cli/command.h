// Subcommand registry. Each src/cli/cmd_<name>.cpp adds itself:
//
//   static void setup(CLI::App& app) {
//     auto* cmd = app.add_subcommand("info", "Describe this machine's CPU and GPUs");
//     auto opts = std::make_shared<Options>();
//     cmd->add_flag("--json", opts->json, "Print JSON");
//     cmd->callback([opts] { gpuopt::cli::set_exit_code(run(*opts)); });
//   }
//   GPUOPT_REGISTER_COMMAND(20, setup);   // 20: position in `gpuopt --help`
//
// Exit codes (docs/cli.md): 0 ok, 1 runtime error, 2 usage error.
#pragma once

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace gpuopt::cli {

constexpr int kExitOk = 0;
constexpr int kExitRuntimeError = 1;
constexpr int kExitUsage = 2;
// The largest --batch a subcommand takes (rows of one request or run).
constexpr int64_t kMaxBatch = 65536;

using CommandSetup = void (*)(CLI::App& app);

struct CommandRegistrar {
  CommandRegistrar(int order, CommandSetup setup);
};

void set_exit_code(int code);
// Prints "gpuopt: error: <status>" on stderr and returns kExitRuntimeError (or kExitUsage for
// invalid arguments given on the command line when `usage` is true).
int report_error(const Status& status, bool usage = false);

// Validators whose messages name what is valid: "'fp17' is not one of fp32, fp16, bf16",
// "0 is not in 1..65536" (CLI11's own print a 300-digit bound for PositiveNumber).
CLI::Validator one_of(std::vector<std::string> choices);
CLI::Validator int_range(int64_t lo, int64_t hi = INT64_MAX);  // INT64_MAX: "an integer >= lo"
CLI::Validator real_range(double lo, double hi);

// Before parsing: a word where a subcommand belongs that names none ("gpuopt bogus",
// "gpuopt bench bogus") is a usage error naming the word and the valid subcommands. Returns
// kExitUsage after printing it, or -1 when the command line names known subcommands.
int check_subcommands(CLI::App& app, int argc, char** argv);
// A CLI11 parse error as one line "gpuopt SUB: error: ... (see 'gpuopt SUB --help')"; returns
// kExitUsage.
int report_parse_error(CLI::App& app, int argc, char** argv, const CLI::ParseError& e);

}  // namespace gpuopt::cli

#define GPUOPT_REGISTER_COMMAND(order, fn) \
  static ::gpuopt::cli::CommandRegistrar GPUOPT_CONCAT(_gpuopt_cmd_, __LINE__)(order, fn)
