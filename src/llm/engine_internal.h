// Pieces of the serving engine shared between its source files (not a public interface).
#pragma once

#include "llm/engine.h"

namespace gpuopt::llm {

// Zero counters, histograms with vLLM's default bucket bounds.
EngineStats empty_engine_stats();

}  // namespace gpuopt::llm
