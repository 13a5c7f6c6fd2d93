// `gpuopt inspect MODEL_DIR` for a language-model folder: the architecture and shape from
// config.json, the weights actually on disk, KV bytes per token and the memory a context x batch
// needs.
//
//   GPUOPT_ASSIGN_OR_RETURN(std::string text, inspect_model_dir("models/tiny-llama", /*json=*/false));
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace gpuopt::llm {

// True for a folder holding config.json (what `inspect` hands to inspect_model_dir).
bool is_model_dir(const std::filesystem::path& p);
// The report as text (tables) or JSON. A checkpoint present but invalid is an error; none at all
// is reported as config-only.
Result<std::string> inspect_model_dir(const std::filesystem::path& dir, bool json);

}  // namespace gpuopt::llm
