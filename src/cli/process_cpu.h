// CPU time this process has used (user + system, every thread), for tools that must say when they
// themselves are the limit of what they measure (`gpuopt perf`):
//   double c0 = process_cpu_seconds(); ...work...; double cores = (process_cpu_seconds() - c0) / wall_s;
#pragma once

#include <sys/resource.h>

namespace gpuopt::cli {

inline double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace gpuopt::cli
