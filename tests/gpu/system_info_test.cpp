// collect_system_info() in-process against the fake NVML and the fake sysfs/proc trees.
#include "monitor/system_info.h"

#include "gpu_test_util.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using testing::data_dir;

void use_fakes(const std::string& lib, const std::string& script) {
  setenv("GPUOPT_NVML_LIBRARY", lib.c_str(), 1);
  setenv("GPUOPT_FAKE_NVML_SCRIPT", script.c_str(), 1);
  setenv("GPUOPT_SYSFS_ROOT", (data_dir() + "/sysfs").c_str(), 1);
  setenv("GPUOPT_PROC_ROOT", (data_dir() + "/proc").c_str(), 1);
}

TEST(SystemInfo, BusIdsNormalise) {
  EXPECT_EQ(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_bus_id("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_bus_id("00000001:19:00.0"), "0001:19:00.0");
}

TEST(SystemInfo, FakeH200Pair) {
  use_fakes(testing::fake_nvml(), data_dir() + "/nvml_h200x2.json");
  SystemInfo s = collect_system_info();
  EXPECT_FALSE(s.nvml_error) << *s.nvml_error;
  ASSERT_EQ(s.gpus.size(), 2U);
  const NvidiaGpu& g = s.gpus[0];
  EXPECT_EQ(g.name, "NVIDIA H200");
  // No CUDA device here: SMs come from NVML's core count over Hopper's 128 lanes per SM.
  EXPECT_EQ(g.sm_count, 132);
  EXPECT_TRUE(g.sm_count_from_nvml_cores);
  ASSERT_NE(g.spec.arch, nullptr);
  EXPECT_EQ(g.spec.arch->arch, Arch::Hopper);
  EXPECT_NEAR(*g.spec.peak(PeakPrecision::FP32) / 66.9e12, 1.0, 0.01);
  EXPECT_TRUE(g.unavailable.empty()) << g.unavailable.front();
  EXPECT_EQ(s.gpus[1].unavailable.size(), 2U);  // enforced and default power limits not scripted
  EXPECT_EQ(s.pci_gpus.size(), 5U);
  EXPECT_EQ(s.host.sockets, 2);
  nlohmann::json j = system_info_json(s);
  EXPECT_EQ(j["gpus"][1]["unavailable"].size(), 2U);
}

TEST(SystemInfo, CoreCountNotAMultipleLeavesSmsUnknown) {
  use_fakes(testing::fake_nvml(), testing::temp_file(R"({"devices": [
      {"name": "odd", "compute_capability": "9.0", "num_gpu_cores": 1000, "max_clocks": {"sm": 1000}}]})"));
  SystemInfo s = collect_system_info();
  ASSERT_EQ(s.gpus.size(), 1U);
  EXPECT_FALSE(s.gpus[0].sm_count) << "1000 cores is not a whole number of Hopper SMs";
  EXPECT_FALSE(s.gpus[0].spec.peak(PeakPrecision::FP32));
}

}  // namespace
}  // namespace gpuopt
