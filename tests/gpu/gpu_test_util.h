// Helpers for tests/gpu: where the fake NVML libraries and test data are, running `gpuopt`.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace gpuopt::testing {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

inline std::string fake_nvml() { return env_or("GPUOPT_FAKE_NVML", "libfake_nvml.so"); }
inline std::string fake_nvml_old() {
  std::string p = fake_nvml();
  return p.substr(0, p.size() - 3) + "_old.so";  // libfake_nvml.so -> libfake_nvml_old.so
}
inline std::string data_dir() { return env_or("GPUOPT_TEST_SOURCE_DIR", ".") + "/tests/gpu/data"; }

// Writes `text` to a fresh temporary file and returns its path.
inline std::string temp_file(const std::string& text, const char* suffix = ".json") {
  std::string tmpl = "/tmp/gpuopt_gpu_test_XXXXXX" + std::string(suffix);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemps(buf.data(), static_cast<int>(std::string(suffix).size()));
  EXPECT_GE(fd, 0);
  if (fd >= 0) {
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  return buf.data();
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunResult {
  int code = -1;
  std::string out, err;
};

// Runs the gpuopt binary (env GPUOPT_BIN) with extra environment and arguments.
inline RunResult run_gpuopt(const std::vector<std::pair<std::string, std::string>>& env, const std::string& args) {
  const char* bin = std::getenv("GPUOPT_BIN");
  EXPECT_NE(bin, nullptr) << "GPUOPT_BIN is not set (run through ctest)";
  RunResult r;
  if (!bin) return r;
  std::string err_path = temp_file("", ".err");
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += " " + k + "='" + v + "'";
  cmd += std::string(" '") + bin + "' " + args + " 2>'" + err_path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_all(err_path);
  std::remove(err_path.c_str());
  return r;
}

inline int count_lines(const std::string& s, const std::string& needle) {
  int n = 0;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

}  // namespace gpuopt::testing
