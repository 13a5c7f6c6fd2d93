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

using CommandSetup = void (*)(CLI::App& app);

struct CommandRegistrar {
  CommandRegistrar(int order, CommandSetup setup);
};

void set_exit_code(int code);
// Prints "gpuopt: error: <status>" on stderr and returns kExitRuntimeError (or kExitUsage for
// invalid arguments given on the command line when `usage` is true).
int report_error(const Status& status, bool usage = false);

}  // namespace gpuopt::cli

#define GPUOPT_REGISTER_COMMAND(order, fn) \
  static ::gpuopt::cli::CommandRegistrar GPUOPT_CONCAT(_gpuopt_cmd_, __LINE__)(order, fn)
