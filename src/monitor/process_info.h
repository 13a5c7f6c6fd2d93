// What /proc says about a process using a GPU: user, command line and container id. Reads into
// fixed buffers (no allocation) so the sampler can call it every tick. GPUOPT_PROC_ROOT replaces
// /proc (the tests build a fake tree).
//
//   ProcessSample p{.pid = 4242};
//   fill_process_info(proc_root(), &p);   // p.user "alice", p.command "python3 train.py", ...
#pragma once

#include "monitor/sampler_types.h"

#include <string>
#include <string_view>

namespace gpuopt::gpu {

// $GPUOPT_PROC_ROOT or "/proc".
const std::string& proc_root();

// Fills user, command and container_id of `p` from <root>/<pid>/{status,cmdline,cgroup}; fields
// it cannot read stay empty (another PID namespace, process gone, no permission).
void fill_process_info(const std::string& root, ProcessSample* p);

// The container id in one /proc/PID/cgroup text: docker, containerd/CRI (cri-containerd-, crio-),
// podman (libpod-) and Kubernetes pod slices; the 64-hex id (or the last id-like path element).
// Empty when the process is not in a container. Writes at most out_size-1 chars.
void container_id_from_cgroup(std::string_view cgroup, char* out, size_t out_size);

}  // namespace gpuopt::gpu
