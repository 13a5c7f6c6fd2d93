// NVTX ranges: names that Nsight Systems (`nsys profile`) and Nsight Compute (`ncu --nvtx
// --nvtx-include "gpuopt:conv1/"`) show around gpuopt's work. Header-only nvtx3 from the CUDA
// toolkit; without CUDA the range is an empty object and compiles away. With no profiler
// attached a push/pop is one call through an uninitialised function pointer: nothing happens.
//
//   { NvtxRange r("/layer1/conv/Conv"); launch(...); }   // a range named "gpuopt:.layer1.conv.Conv"
//
// ncu reads '/' in --nvtx-include as nesting ("outer/inner/"), so a '/' in a name (torch.onnx
// names nodes "/layer1/conv/Conv") becomes '.'; the prefix "gpuopt:" marks every range as ours.
#pragma once

#include <string>

#if defined(GPUOPT_HAVE_CUDA) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define GPUOPT_HAVE_NVTX 1
#endif

namespace gpuopt {

// Every gpuopt range name starts with this.
inline constexpr const char* kNvtxPrefix = "gpuopt:";

// The range name of `name`: the prefix, then the name with '/' as '.'.
inline std::string nvtx_range_name(const std::string& name) {
  std::string s = kNvtxPrefix;
  s.reserve(s.size() + name.size());
  for (char c : name) s += c == '/' ? '.' : c;
  return s;
}

class NvtxRange {
 public:
#ifdef GPUOPT_HAVE_NVTX
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(nvtx_range_name(name).c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
#else
  explicit NvtxRange(const std::string&) {}
#endif
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// True when this build emits NVTX ranges (a CUDA build with the nvtx3 headers).
constexpr bool nvtx_enabled() {
#ifdef GPUOPT_HAVE_NVTX
  return true;
#else
  return false;
#endif
}

}  // namespace gpuopt
