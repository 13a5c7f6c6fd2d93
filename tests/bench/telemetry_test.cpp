// Telemetry through NVML, against the fake NVML library (tests/fake_nvml): the reader finds the
// device by PCI bus id and reads clocks, temperature and power; absent values stay n/a.
#include "bench/telemetry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gpuopt::bench {
namespace {

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* lib = std::getenv("GPUOPT_FAKE_NVML");
    if (!lib || !std::filesystem::exists(lib)) GTEST_SKIP() << "fake NVML library not built";
    script_ = std::filesystem::temp_directory_path() / ("bench_nvml_" + std::to_string(::getpid()) + ".json");
    std::ofstream(script_) << R"({"devices": [
      {"name": "NVIDIA H200", "pci": {"bus_id": "00000000:19:00.0"},
       "clocks": {"sm": 1980, "mem": 3201}, "temperature": 41, "power_usage_mw": 412500},
      {"name": "NVIDIA H200", "pci": {"bus_id": "00000000:1A:00.0"},
       "clocks": {"sm": [345, 1755]}, "temperature": 30}]})";
    setenv("GPUOPT_NVML_LIBRARY", lib, 1);
    setenv("GPUOPT_FAKE_NVML_SCRIPT", script_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("GPUOPT_NVML_LIBRARY");
    unsetenv("GPUOPT_FAKE_NVML_SCRIPT");
    if (!script_.empty()) std::filesystem::remove(script_);
  }
  std::filesystem::path script_;
};

TEST_F(FakeNvml, ReadsTheDeviceWithTheSameBusId) {
  const TelemetryReader r = TelemetryReader::open("0000:19:00.0");  // CUDA's spelling
  ASSERT_TRUE(r.available());
  const Telemetry t = r.sample();
  EXPECT_EQ(*t.sm_clock_mhz, 1980);
  EXPECT_EQ(*t.mem_clock_mhz, 3201);
  EXPECT_EQ(*t.temperature_c, 41);
  EXPECT_DOUBLE_EQ(*t.power_w, 412.5);
}

TEST_F(FakeNvml, SecondDeviceAndMissingValues) {
  const TelemetryReader r = TelemetryReader::open("0000:1a:00.0");
  ASSERT_TRUE(r.available());
  const Telemetry a = r.sample(), b = r.sample();
  EXPECT_EQ(*a.sm_clock_mhz, 345);  // each sample reads afresh
  EXPECT_EQ(*b.sm_clock_mhz, 1755);
  EXPECT_EQ(*a.temperature_c, 30);
  EXPECT_FALSE(a.power_w);  // not scripted: NOT_SUPPORTED -> n/a
  EXPECT_FALSE(a.mem_clock_mhz);
}

TEST_F(FakeNvml, UnknownBusIdReadsNothing) {
  const TelemetryReader r = TelemetryReader::open("0000:99:00.0");
  EXPECT_FALSE(r.available());
  EXPECT_FALSE(r.sample().temperature_c);
}

}  // namespace
}  // namespace gpuopt::bench
