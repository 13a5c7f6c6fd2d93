// Levelled logging to stderr. Level from GPUOPT_LOG_LEVEL (error|warn|info|debug|trace),
// default warn; `--log-verbose`/`-v` flags raise it.
//
//   GPUOPT_LOG(info, "loaded '{}' in {:.1f} ms", path, ms);
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace gpuopt {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "error".."trace" or "0".."4"; returns false if unknown.
bool parse_log_level(std::string_view text, LogLevel* out);
void log_write(LogLevel level, const char* file, int line, std::string_view message);

}  // namespace gpuopt

#define GPUOPT_LOG(level, ...)                                                            \
  do {                                                                                    \
    if (::gpuopt::LogLevel::level <= ::gpuopt::log_level())                               \
      ::gpuopt::log_write(::gpuopt::LogLevel::level, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)
