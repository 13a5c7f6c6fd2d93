// gpuopt: one executable, one subcommand per src/cli/cmd_*.cpp.
#include "cli/command.h"
#include "core/log.h"
#include "gpuopt/build_info.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

namespace gpuopt::cli {
namespace {

struct Entry {
  int order;
  CommandSetup setup;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}

int g_exit_code = kExitOk;

}  // namespace

CommandRegistrar::CommandRegistrar(int order, CommandSetup setup) { registry().push_back({order, setup}); }

void set_exit_code(int code) { g_exit_code = code; }

int report_error(const Status& status, bool usage) {
  std::fprintf(stderr, "gpuopt: error: %s\n", status.to_string().c_str());
  return usage ? kExitUsage : kExitRuntimeError;
}

}  // namespace gpuopt::cli

int main(int argc, char** argv) {
  using namespace gpuopt;
  CLI::App app{"gpuopt: compile, tune, serve and watch models on NVIDIA GPUs", "gpuopt"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", fmt::format("gpuopt {} ({})", GPUOPT_VERSION_STRING, GPUOPT_GIT_HASH),
                       "Print the version and exit ('gpuopt version' for the libraries)");
  // Global options (--log-level) anywhere on the line: a subcommand hands the options it does not
  // know to the top level (subcommands inherit fallthrough when they are added below).
  app.fallthrough();
  std::string level;
  app.add_option("--log-level", level, "error, warn, info, debug or trace (default: $GPUOPT_LOG_LEVEL or warn)")
      ->each([](const std::string& s) {
        LogLevel l;
        if (!parse_log_level(s, &l))
          throw CLI::ValidationError("--log-level", "'" + s + "' is not one of error, warn, info, debug, trace");
        set_log_level(l);
      });
  auto& reg = cli::registry();
  std::stable_sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (const auto& e : reg) e.setup(app);
  // `gpuopt --version` alone: before the parse, which would first ask for a subcommand.
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    std::printf("%s\n", app.version().c_str());
    return cli::kExitOk;
  }
  if (int rc = cli::check_subcommands(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return cli::report_parse_error(app, argc, argv, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuopt: error: %s\n", e.what());
    return cli::kExitRuntimeError;
  }
  return cli::g_exit_code;
}
