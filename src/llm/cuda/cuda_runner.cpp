// Placeholder so CUDA builds link; helper llmcuda replaces this file with the CUDA runner.
#include "llm/runner.h"

namespace gpuopt::llm {

Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig&, const Checkpoint&, const RunnerOptions&) {
  return Status::Unimplemented("the CUDA runner is not built yet");
}

}  // namespace gpuopt::llm
