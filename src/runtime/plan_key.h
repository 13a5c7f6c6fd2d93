// What besides the model file's bytes changes a session's compiled graph and kernel choices: the
// text Session::load folds into the plan cache's model hash (backends/plan_cache.h model_hash), so
// a cache written under another precision or other kernel settings is not reused.
//
//   const std::string settings = plan_cache_settings("fp16", true, kernel_settings);
//   GPUOPT_ASSIGN_OR_RETURN(std::string hash, model_hash(model_path, settings));
#pragma once

#include "gpuopt/kernel_settings.h"

#include <string>
#include <string_view>

namespace gpuopt {

std::string plan_cache_settings(std::string_view precision, bool optimize, const KernelSettings& settings);

}  // namespace gpuopt
