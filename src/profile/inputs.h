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
// The concrete shape a random input takes: declared dims, `dims` for named symbolic ones,
// `batch` for a dynamic leading one. The errors name the input and dim; `alternative` (e.g.
// "--input x=FILE.npy", or empty) is the other way the caller's user can give it.
Result<Shape> random_input_shape(const TensorInfo& in, int64_t batch, const std::map<std::string, int64_t>& dims,
                                 const std::string& alternative = "");
// "NAME=VALUE" flags into a map; the error names the bad one.
Result<std::map<std::string, int64_t>> parse_dims(const std::vector<std::string>& kvs);

}  // namespace gpuopt::profile
