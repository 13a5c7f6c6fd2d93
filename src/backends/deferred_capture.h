// Start work an executable can do after it was handed out: the CUDA executor's re-capture of the
// input shapes the plan cache lists as captured (backends/captured_shapes.h). Session::load does
// it all before returning unless SessionOptions::defer_graph_capture; the server's instances
// then do it one shape at a time on their own thread while idle (after `ready`). Not part of
// backend.h's interface: the CUDA executor implements it beside Executable.
//
//   if (auto* d = dynamic_cast<DeferredCapture*>(exe)) while (d->capture_next_cached_shape()) {}
#pragma once

namespace gpuopt {

class DeferredCapture {
 public:
  virtual ~DeferredCapture() = default;
  // Captures the next listed shape (an eager run on zeros with the cached plans, then the
  // captured one; a shape that fails is skipped with a warning). False when none was left. Call
  // it from the thread that runs the executable (never beside a run of it).
  virtual bool capture_next_cached_shape() = 0;
};

}  // namespace gpuopt
