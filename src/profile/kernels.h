// GPU kernels of a profile: every kernel the node-by-node runs launch, recorded by CUPTI's
// activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) with its name, stream, grid and times,
// and given to the graph node whose launch it belongs to. libcupti is loaded with dlopen when a
// capture starts, so the binary takes no link dependency on it; without it (or without CUDA)
// start() says why in one line and the profile keeps its node-level GPU slices.
//
// Kernels are matched to nodes by time: a node-by-node run waits on the host after each node,
// so a node's kernels run inside its host interval [start_us, start_us + wall_us]. CUPTI is
// given the steady clock (now_us) as its timestamp source, so both sides use one clock.
//
//   auto cap = KernelCapture::start();          // before the runs
//   ... profiled runs ...
//   auto k = (*cap)->finish();                  // after them: every kernel, by start time
//   attach_kernels(std::move(*k), &result);     // into result.runs[i].kernels, node set
#pragma once

#include "core/status.h"
#include "profile/profile.h"

#include <memory>
#include <string>
#include <vector>

namespace gpuopt::profile {

class KernelCapture {
 public:
  // Loads libcupti (once) and starts recording kernels on every device. One capture at a time.
  // `library`: that file instead of the search (tests load a fake CUPTI this way).
  static Result<std::unique_ptr<KernelCapture>> start(const std::string& library = "");
  virtual ~KernelCapture() = default;
  // Waits for the device, stops recording and returns the kernels by start time; `note` gets
  // one line when CUPTI dropped records (a buffer ran full) or the cap on records was reached.
  virtual Result<std::vector<KernelRecord>> finish(std::string* note) = 0;
};

// Gives each kernel to the run whose host interval holds it (kernels outside every run are
// dropped) and, inside it, to the node whose interval holds the kernel's midpoint (node = -1
// between nodes: input staging, output copies). Fills r->runs[k].kernels, by start time.
void attach_kernels(std::vector<KernelRecord> kernels, ProfileResult* r);

// Kernels by name over the runs, slowest first (the first top_k); `total_us` gets the summed
// kernel time per run.
std::vector<KernelRow> summarize_kernels(const ProfileResult& r, int top_k, double* total_us);
nlohmann::json kernel_rows_json(const std::vector<KernelRow>& rows);
std::string render_kernel_rows(const std::vector<KernelRow>& rows);

// "_Z6squarePfi" -> "square(float*, int)"; a name that is not mangled comes back as it is.
std::string demangle(const char* name);

}  // namespace gpuopt::profile
