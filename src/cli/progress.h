// A progress bar on stderr for long work (calibration, quantization, perplexity): redrawn in
// place on a terminal, one line per quarter otherwise (logs stay short).
//
//   for (size_t i = 0; i < n; ++i) { work(i); progress_bar("calibrating", i + 1, n); }
#pragma once

#include <cstddef>
#include <string_view>

namespace gpuopt::cli {

void progress_bar(std::string_view stage, size_t done, size_t total);

}  // namespace gpuopt::cli
