// Points NVML at the fake library with a JSON script for one test (tests/fake_nvml/README.md).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace gpuopt::gpu::testing {

class FakeNvmlScript {
 public:
  explicit FakeNvmlScript(const nlohmann::json& script) {
    static int n = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("gpuopt_monitor_fake_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".json");
    std::ofstream(path_) << script.dump(2);
    const char* lib = std::getenv("GPUOPT_FAKE_NVML");
    available_ = lib && std::filesystem::exists(lib);
    if (available_) ::setenv("GPUOPT_NVML_LIBRARY", lib, 1);
    ::setenv("GPUOPT_FAKE_NVML_SCRIPT", path_.c_str(), 1);
  }
  ~FakeNvmlScript() {
    std::filesystem::remove(path_);
    ::unsetenv("GPUOPT_FAKE_NVML_SCRIPT");
  }
  bool available() const { return available_; }

 private:
  std::filesystem::path path_;
  bool available_ = false;
};

#define GPUOPT_REQUIRE_FAKE_NVML(script)                                                        \
  if (!(script).available()) GTEST_SKIP() << "GPUOPT_FAKE_NVML not set (run through ctest)"

}  // namespace gpuopt::gpu::testing
