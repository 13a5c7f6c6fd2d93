// Seeded random inputs for a loaded session (profile, tune): floats uniform in [-1, 1), integers
// in [0, 8) (valid token ids and indices for small vocabularies), bools fair coins. A dynamic
// leading dim takes `batch`; other symbolic dims come from `dims` (NAME -> value).
#pragma once

#include "core/status.h"
#include "gpuopt/session.h"

#include <cstdint>
#include <map>
#include <string>

namespace gpuopt::profile {

Result<NamedTensors> random_feeds(const Session& s, int64_t batch, const std::map<std::string, int64_t>& dims,
                                  uint64_t seed);
// "NAME=VALUE" flags into a map; the error names the bad one.
Result<std::map<std::string, int64_t>> parse_dims(const std::vector<std::string>& kvs);

}  // namespace gpuopt::profile
