// `gpuopt version`: what this binary was built with and what it finds at run time.
#include "cli/command.h"
#include "gpuopt/build_info.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpuopt::cli {
namespace {

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the version, git hash and library versions");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    nlohmann::json j = {{"version", GPUOPT_VERSION_STRING},
                        {"git_hash", GPUOPT_GIT_HASH},
                        {"build_type", GPUOPT_BUILD_TYPE},
                        {"compiler", GPUOPT_CXX_COMPILER},
                        {"cuda_toolkit", GPUOPT_CUDA_TOOLKIT_VERSION},
                        {"cuda_archs", GPUOPT_CUDA_ARCHS_STRING}};
    if (*json) {
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print("gpuopt {} ({})\n", GPUOPT_VERSION_STRING, GPUOPT_GIT_HASH);
    fmt::print("  built with      {} ({}), CUDA toolkit {} (archs {})\n", GPUOPT_CXX_COMPILER, GPUOPT_BUILD_TYPE,
               GPUOPT_CUDA_TOOLKIT_VERSION, GPUOPT_CUDA_ARCHS_STRING);
  });
}
GPUOPT_REGISTER_COMMAND(90, setup);

}  // namespace
}  // namespace gpuopt::cli
