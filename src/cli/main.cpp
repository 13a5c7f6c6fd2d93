// gpuopt: one executable, one subcommand per src/cli/cmd_*.cpp.
#include "cli/command.h"
#include "core/log.h"

#include <algorithm>
#include <cstdio>
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
