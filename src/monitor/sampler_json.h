// A Snapshot (and the diagnosis findings) as JSON for `gpuopt monitor --json`: one object per
// snapshot, n/a fields as null, units in the key names.
#pragma once

#include "monitor/diagnosis.h"
#include "monitor/sampler_types.h"

#include <nlohmann/json.hpp>

namespace gpuopt::gpu {

nlohmann::json snapshot_to_json(const Snapshot& s, const std::vector<Finding>& findings);

}  // namespace gpuopt::gpu
