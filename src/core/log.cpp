#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace gpuopt {
namespace {

LogLevel initial_level() {
  LogLevel l = LogLevel::warn;
  if (const char* env = std::getenv("GPUOPT_LOG_LEVEL")) {
    if (!parse_log_level(env, &l)) {
      std::fprintf(stderr, "gpuopt: warning: GPUOPT_LOG_LEVEL='%s' is not one of error|warn|info|debug|trace\n", env);
      l = LogLevel::warn;
    }
  }
  return l;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::error: return "E";
    case LogLevel::warn: return "W";
    case LogLevel::info: return "I";
    case LogLevel::debug: return "D";
    case LogLevel::trace: return "T";
  }
  return "?";
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_ref().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }

bool parse_log_level(std::string_view t, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"error", LogLevel::error}, {"warn", LogLevel::warn},   {"warning", LogLevel::warn},
      {"info", LogLevel::info},   {"debug", LogLevel::debug}, {"trace", LogLevel::trace},
      {"0", LogLevel::error},     {"1", LogLevel::warn},      {"2", LogLevel::info},
      {"3", LogLevel::debug},     {"4", LogLevel::trace}};
  for (auto& [name, l] : kNames) {
    if (t == name) {
      *out = l;
      return true;
    }
  }
  return false;
}

void log_write(LogLevel level, const char* file, int line, std::string_view message) {
  static std::mutex mu;
  using namespace std::chrono;
  const auto now = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s %lld.%06lld %s:%d] %.*s\n", level_name(level), static_cast<long long>(now / 1000000),
               static_cast<long long>(now % 1000000), base, line, static_cast<int>(message.size()), message.data());
}

}  // namespace gpuopt
