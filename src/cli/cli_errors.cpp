// Usage errors of the command line: validators that name the valid values, unknown
// subcommands, and CLI11's parse errors printed as one "gpuopt SUB: error: ..." line.
#include "cli/command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdio>

namespace gpuopt::cli {
namespace {

std::vector<CLI::App*> subcommands_of(CLI::App* app) {
  return app->get_subcommands([](CLI::App*) { return true; });
}

std::vector<std::string> subcommand_names(CLI::App* app) {
  std::vector<std::string> v;
  for (CLI::App* s : subcommands_of(app)) v.push_back(s->get_name());
  return v;
}

struct Walk {
  CLI::App* app;      // the deepest subcommand named
  std::string path;   // "gpuopt bench all"
  std::string unknown;  // a word where a subcommand was expected, if any
};

// Follows the command line through the subcommand tree the way CLI11 will: option words (and
// the value of an option that takes one) are skipped until a leaf subcommand is reached.
Walk walk(CLI::App& app, int argc, char** argv) {
  Walk w{&app, "gpuopt", ""};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (subcommands_of(w.app).empty() || a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      if (a.find('=') == std::string::npos) {
        const CLI::Option* opt = w.app->get_option_no_throw(a);
        if (opt && opt->get_items_expected_min() > 0) ++i;
      }
      continue;
    }
    CLI::App* sub = nullptr;
    for (CLI::App* s : subcommands_of(w.app))
      if (s->check_name(a)) sub = s;
    if (!sub) {
      w.unknown = a;
      break;
    }
    w.app = sub;
    w.path += " " + a;
  }
  return w;
}

}  // namespace

CLI::Validator one_of(std::vector<std::string> choices) {
  const std::string desc = fmt::format("{{{}}}", fmt::join(choices, ","));
  return CLI::Validator(
      [choices](std::string& v) -> std::string {
        for (const auto& c : choices)
          if (v == c) return "";
        return fmt::format("'{}' is not one of {}", v, fmt::join(choices, ", "));
      },
      desc, "one_of");
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        int64_t x = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
          return hi == INT64_MAX ? fmt::format("'{}' is not an integer >= {}", v, lo)
                                 : fmt::format("'{}' is not an integer in {}..{}", v, lo, hi);
        return "";
      },
      hi == INT64_MAX ? fmt::format("INT >= {}", lo) : fmt::format("INT in {}..{}", lo, hi), "int_range");
}

CLI::Validator real_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(x >= lo && x <= hi))
          return fmt::format("'{}' is not a number in {:g}..{:g}", v, lo, hi);
        return "";
      },
      fmt::format("NUMBER in {:g}..{:g}", lo, hi), "real_range");
}

int check_subcommands(CLI::App& app, int argc, char** argv) {
  const Walk w = walk(app, argc, argv);
  if (w.unknown.empty()) return -1;
  std::fprintf(stderr, "%s: error: unknown subcommand '%s'; valid subcommands: %s\n", w.path.c_str(),
               w.unknown.c_str(), fmt::format("{}", fmt::join(subcommand_names(w.app), ", ")).c_str());
  return kExitUsage;
}

int report_parse_error(CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  const Walk w = walk(app, argc, argv);
  std::string msg = e.what();
  const std::string kind = e.get_name();  // the error class, except ExtrasError in a subcommand
  if (const size_t at = msg.find("not expected: "); at != std::string::npos) {
    // ExtrasError (named after the subcommand, so found by its text): name the words and, for
    // an unknown option, the options there are.
    const std::string words = msg.substr(at + 14);
    if (words.starts_with("-")) {
      std::vector<std::string> names;
      for (const CLI::Option* opt : w.app->get_options())
        if (opt->nonpositional()) names.push_back(opt->get_name());
      msg = fmt::format("unknown option {}; the options are {}", words, fmt::join(names, ", "));
    } else {
      msg = fmt::format("unexpected argument {}", words);
    }
  } else if (kind == "RequiredError" && !subcommands_of(w.app).empty()) {
    msg = fmt::format("a subcommand is required: {}", fmt::join(subcommand_names(w.app), ", "));
  } else if (kind == "ValidationError") {
    // CLI11 repeats the option name ("--x: --x: ...") when a validator names it too.
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos && msg.compare(colon + 2, colon + 2, msg.substr(0, colon + 2)) == 0)
      msg = msg.substr(colon + 2);
  }
  std::fprintf(stderr, "%s: error: %s (see '%s --help')\n", w.path.c_str(), msg.c_str(), w.path.c_str());
  return kExitUsage;
}

}  // namespace gpuopt::cli
