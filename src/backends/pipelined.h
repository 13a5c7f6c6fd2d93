// Runs of one executable overlapped across consecutive batches (the server's instances): begin()
// enqueues a run and returns without waiting for it, finish() waits for the oldest begun run and
// returns its outputs. With two runs begun, the second one's upload proceeds while the first
// computes, and the first one's download while the second computes. A backend that can do this
// implements PipelinedExecutable beside Executable (the CUDA executor); Session::begin_ordered
// falls back to running synchronously for the others.
//
//   auto* p = dynamic_cast<PipelinedExecutable*>(exe);
//   GPUOPT_RETURN_IF_ERROR(p->begin(batch1));
//   GPUOPT_RETURN_IF_ERROR(p->begin(batch2));        // uploads while batch1 computes
//   GPUOPT_ASSIGN_OR_RETURN(auto out1, p->finish());   // batch1's outputs
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <vector>

namespace gpuopt {

// At most this many runs begun and not finished (FailedPrecondition above it).
constexpr int kPipelineDepth = 2;

class PipelinedExecutable {
 public:
  virtual ~PipelinedExecutable() = default;
  // `inputs` as Executable::run takes them (validated, graph order). One caller thread at a time.
  virtual Status begin(const std::vector<Tensor>& inputs) = 0;
  // The oldest begun run's outputs (or its error); FailedPrecondition when none was begun.
  virtual Result<std::vector<Tensor>> finish() = 0;
};

}  // namespace gpuopt
