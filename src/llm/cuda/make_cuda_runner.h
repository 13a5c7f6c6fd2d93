// make_cuda_runner with a progress callback for the weight upload (bytes done, bytes total),
// called on the calling thread as staging chunks land. runner.h's overload passes none.
#pragma once

#include "llm/runner.h"

namespace gpuopt::llm {

Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                      const RunnerOptions& opts, const LoadProgress& progress);

}  // namespace gpuopt::llm
