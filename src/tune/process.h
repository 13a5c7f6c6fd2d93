// Child processes for the online search: a `gpuopt serve` in the background, `gpuopt perf`
// with its output captured. posix_spawn, no shell.
#pragma once

#include "core/status.h"

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuopt::tune {

// Starts argv[0] with stdout and stderr appended to `log_path`.
Result<pid_t> spawn_logged(const std::vector<std::string>& argv, const std::string& log_path);
// Runs argv to completion (killed after `timeout_s`); returns its stdout; `exit_code` gets its
// exit status (or 128 + signal). stderr goes to `stderr_path` ("" = /dev/null).
Result<std::string> run_captured(const std::vector<std::string>& argv, double timeout_s, int* exit_code,
                                 const std::string& stderr_path = "");
// True while `pid` has not exited (reaps it when it has).
bool is_running(pid_t pid);
// SIGTERM, then SIGKILL after `grace_s`; always reaps.
void stop_process(pid_t pid, double grace_s);
// The running executable's path (/proc/self/exe).
std::string self_exe();

}  // namespace gpuopt::tune
