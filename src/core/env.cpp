#include "core/env.h"

#include "core/status.h"

#include <cstdlib>
#include <cstring>

namespace gpuopt {

const std::vector<EnvVar>& env_vars() {
  static const std::vector<EnvVar> kVars = {
#define GPUOPT_X(name, def, desc) {#name, def, desc},
      GPUOPT_ENV_VARS(GPUOPT_X)
#undef GPUOPT_X
  };
  return kVars;
}

std::optional<std::string> env_get(const char* name) {
  bool known = false;
  for (const auto& v : env_vars()) known |= std::strcmp(v.name, name) == 0;
  GPUOPT_ASSERT(known, "environment variable {} is not in GPUOPT_ENV_VARS (src/core/env.h)", name);
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

}  // namespace gpuopt
