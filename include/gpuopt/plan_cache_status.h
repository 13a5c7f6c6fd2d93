// How a session's start went with the plan cache (Session::plan_cache(), docs/engine.md). Its own
// header because the backends report it too (backends/backend.h) and must not include session.h.
#pragma once

#include <cstddef>
#include <string>

namespace gpuopt {

// How a session's start went with the plan cache (Session::plan_cache()).
struct PlanCacheStatus {
  std::string state = "off";  // off, cold (no file), warm (read), stale (another GPU/driver/library/build), corrupt
  std::string path;           // the cache file
  size_t entries = 0;         // choices read from it (warm)
  std::string note;           // why stale or corrupt, or why off
};

}  // namespace gpuopt
