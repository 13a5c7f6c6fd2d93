// `gpuopt perf`'s shared-memory regions on the client side (--shared-memory system|cuda): a POSIX
// shm segment (named by its key) or an exportable CUDA allocation (IPC handle), made and filled
// by the worker that registers it with the server.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto r, make_region("gpuopt_perf_1_in", 4096, /*cuda=*/false));
//   GPUOPT_RETURN_IF_ERROR(write_region(*r, 0, bytes));
#pragma once

#include "core/status.h"

#include <memory>
#include <string>

namespace gpuopt::cli {

// One region on the client side: POSIX shm (key) or a CUDA allocation (IPC handle).
struct Region {
  std::string name, key, raw_handle;
  bool cuda = false;
  size_t bytes = 0;
  void* ptr = nullptr;
  ~Region();
};

Result<std::unique_ptr<Region>> make_region(const std::string& name, size_t bytes, bool cuda);
Status write_region(Region& r, size_t offset, const std::string& bytes);

}  // namespace gpuopt::cli
