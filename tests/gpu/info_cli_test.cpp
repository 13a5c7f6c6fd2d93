// `gpuopt info` end to end: the real binary against the fake NVML, fake sysfs and procfs trees.
#include "gpu_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

namespace gpuopt::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Env fake_env(const std::string& lib, const std::string& script) {
  return {{"GPUOPT_NVML_LIBRARY", lib},
          {"GPUOPT_FAKE_NVML_SCRIPT", script},
          {"GPUOPT_SYSFS_ROOT", data_dir() + "/sysfs"},
          {"GPUOPT_PROC_ROOT", data_dir() + "/proc"}};
}

nlohmann::json info_json(const Env& env) {
  RunResult r = run_gpuopt(env, "info --json");
  EXPECT_EQ(r.code, 0) << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "info --json is not JSON: " << e.what() << "\n" << r.out;
    return {};
  }
}

const std::string kH200 = data_dir() + "/nvml_h200x2.json";

TEST(InfoCli, ReportsH200FromFakeNvml) {
  RunResult r = run_gpuopt(fake_env(fake_nvml(), kH200), "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out, "· NVIDIA H200"), 2) << r.out;
  EXPECT_NE(r.out.find("580.95.05"), std::string::npos);
  EXPECT_NE(r.out.find("9.0 (Hopper"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gen 5 x16"), std::string::npos);
  EXPECT_NE(r.out.find("700 W"), std::string::npos);
  EXPECT_NE(r.out.find("16896"), std::string::npos);
  EXPECT_NE(r.out.find("66.9 TFLOP/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4.92 TB/s"), std::string::npos) << r.out;
}

TEST(InfoCli, JsonCarriesEveryField) {
  nlohmann::json j = info_json(fake_env(fake_nvml(), kH200));
  ASSERT_EQ(j["gpus"].size(), 2U);
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["name"], "NVIDIA H200");
  EXPECT_EQ(g["uuid"], "GPU-5a1f3c2e-8b7d-4e61-9f20-1c3d5e7f9a0b");
  EXPECT_EQ(g["pci_bus_id"], "00000000:19:00.0");
  EXPECT_EQ(g["compute_capability"], "9.0");
  EXPECT_EQ(g["sm_count"], 132);
  EXPECT_EQ(g["cuda_cores"], 16896);
  EXPECT_EQ(g["tensor_core_generation"], 4);
  EXPECT_EQ(g["memory"]["total_bytes"], 150754820096ULL);
  EXPECT_EQ(g["memory"]["reserved_bytes"], 603979776ULL);
  EXPECT_EQ(g["max_sm_clock_mhz"], 1980);
  EXPECT_EQ(g["max_mem_clock_mhz"], 3201);
  EXPECT_EQ(g["mem_bus_width_bits"], 6144);
  EXPECT_EQ(g["power_limit_w"], 700.0);
  EXPECT_EQ(g["pcie"]["gen"], 5);
  EXPECT_EQ(g["pcie"]["max_width"], 16);
  EXPECT_EQ(g["mig_enabled"], false);
  EXPECT_EQ(g["persistence_mode"], true);
  EXPECT_EQ(g["compute_mode"], "default");
  EXPECT_EQ(g["gpm_supported"], true);
  double bf16 = g["theoretical"]["peak_ops_per_s"]["bf16"];
  EXPECT_NEAR(bf16 / (4096.0 * 132 * 1980e6), 1.0, 1e-9);
  EXPECT_EQ(j["gpus"][1]["mig_enabled"], true);
  EXPECT_EQ(j["gpus"][1]["compute_mode"], "exclusive_process");
  EXPECT_EQ(j["nvml"]["driver_version"], "580.95.05");
  EXPECT_EQ(j["nvml"]["cuda_driver_version"], "13.0");
  EXPECT_TRUE(j["nvml"]["error"].is_null());
}

TEST(InfoCli, OldDriverWithoutNewerSymbols) {
  nlohmann::json j = info_json(fake_env(fake_nvml_old(), kH200));
  ASSERT_EQ(j["gpus"].size(), 2U);
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["name"], "NVIDIA H200");
  EXPECT_EQ(g["pci_bus_id"], "0000:19:00.0");
  EXPECT_EQ(g["memory"]["total_bytes"], 150754820096ULL);
  EXPECT_TRUE(g["memory"]["reserved_bytes"].is_null());
  EXPECT_TRUE(g["gpm_supported"].is_null());
  EXPECT_TRUE(g["pcie"]["gpu_max_gen"].is_null());
  EXPECT_EQ(g["pcie"]["gen"], 5);
  std::set<std::string> missing(j["nvml"]["missing_optional_symbols"].begin(), j["nvml"]["missing_optional_symbols"].end());
  EXPECT_TRUE(missing.count("nvmlDeviceGetMemoryInfo_v2"));
  EXPECT_TRUE(missing.count("nvmlGpmMetricsGet"));
  EXPECT_FALSE(missing.count("nvmlDeviceGetPciInfo_v3")) << "found under an older name, so not missing";
}

TEST(InfoCli, QueryErrorsShowAsNaAndExitZero) {
  std::string script = temp_file(R"({
    "driver_version": "580.95.05",
    "fail": {"nvmlDeviceGetPowerManagementLimit": "NOT_SUPPORTED", "nvmlDeviceGetMaxClockInfo": "GPU_IS_LOST",
             "nvmlDeviceGetUUID": "NO_PERMISSION"},
    "devices": [{"name": "NVIDIA H200", "pci": {"bus_id": "00000000:19:00.0"}, "compute_capability": "9.0",
                 "num_gpu_cores": 16896, "memory": {"total": 150754820096, "used": 0},
                 "fail": {"nvmlDeviceGetMemoryInfo": "UNKNOWN", "nvmlDeviceGetMemoryInfo_v2": "UNKNOWN"}}]})");
  RunResult r = run_gpuopt(fake_env(fake_nvml(), script), "info --verbose");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t gpu_block = r.out.find("GPU 0 ·");
  ASSERT_NE(gpu_block, std::string::npos) << r.out;
  auto line_of = [&](const std::string& key) {
    auto pos = r.out.find("\n" + key, gpu_block);
    return pos == std::string::npos ? std::string() : r.out.substr(pos + 1, r.out.find('\n', pos + 1) - pos - 1);
  };
  EXPECT_NE(line_of("power limit").find("n/a"), std::string::npos) << r.out;
  EXPECT_NE(line_of("max SM clock").find("n/a"), std::string::npos) << r.out;
  EXPECT_NE(line_of("UUID").find("n/a"), std::string::npos) << r.out;
  EXPECT_NE(line_of("memory ").find("n/a"), std::string::npos) << r.out;
  EXPECT_NE(line_of("SMs").find("132"), std::string::npos) << "unaffected fields still print\n" << r.out;
  EXPECT_NE(r.out.find("n/a: power limit: nvmlDeviceGetPowerManagementLimit failed: Not Supported"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GPU is lost"), std::string::npos) << r.out;
}

TEST(InfoCli, NoDriverIsOneLineAndExitZero) {
  Env env = fake_env("/nonexistent/libnvidia-ml.so.1", "");
  RunResult r = run_gpuopt(env, "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out, "NVIDIA GPUs: none usable"), 1) << r.out;
  EXPECT_EQ(count_lines(r.out, "NVML not found"), 1) << r.out;
  // Without libcuda.so.1 either (no GPU machine), the line says there is no driver, not that it is
  // too old (the CUDA runtime's "driver version is insufficient").
  if (r.out.find("libcuda.so.1 not found") != std::string::npos) {
    EXPECT_EQ(count_lines(r.out, "none usable: no NVIDIA driver is installed"), 1) << r.out;
  }
  EXPECT_EQ(r.out.find("insufficient"), std::string::npos) << r.out;
  // The rest is still reported.
  EXPECT_NE(r.out.find("AMD EPYC 9654"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0000:19:00.0"), std::string::npos) << r.out;
  nlohmann::json j = info_json(env);
  EXPECT_EQ(j["gpus"].size(), 0U);
  EXPECT_NE(j["nvml"]["error"].get<std::string>().find("NVML not found"), std::string::npos);
}

TEST(InfoCli, DriverWithNoGpuIsOneLine) {
  RunResult r = run_gpuopt(fake_env(fake_nvml(), temp_file(R"({"driver_version": "580.95.05", "devices": []})")), "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out, "NVIDIA GPUs: none usable (NVML"), 1) << r.out;
  EXPECT_NE(r.out.find("found no NVIDIA GPU"), std::string::npos) << r.out;
}

TEST(InfoCli, InitFailureIsOneLine) {
  std::string script = temp_file(R"({"fail": {"nvmlInit": "DRIVER_NOT_LOADED"}})");
  RunResult r = run_gpuopt(fake_env(fake_nvml(), script), "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out, "NVIDIA GPUs: none usable (NVML init failed: Driver Not Loaded"), 1) << r.out;
}

TEST(InfoCli, FakeSysfsAndProcTrees) {
  nlohmann::json j = info_json(fake_env("/nonexistent", ""));
  const auto& h = j["host"];
  EXPECT_EQ(h["cpu_model"], "AMD EPYC 9654 96-Core Processor");
  EXPECT_EQ(h["logical_cpus"], 8);
  EXPECT_EQ(h["physical_cores"], 4);
  EXPECT_EQ(h["sockets"], 2);
  EXPECT_EQ(h["mem_total_bytes"], 1584872032ULL * 1024);
  EXPECT_EQ(h["mem_available_bytes"], 1520000000ULL * 1024);
  EXPECT_EQ(h["hostname"], "h200-node-7");
  EXPECT_EQ(h["kernel"], "6.8.0-87-generic");
  // GPUs of the three vendors; not the audio functions, the NVSwitch or the ASPEED BMC VGA.
  std::vector<std::string> addrs;
  for (const auto& p : j["pci_gpus"]) addrs.push_back(p["address"]);
  EXPECT_EQ(addrs, (std::vector<std::string>{"0000:00:02.0", "0000:19:00.0", "0000:3b:00.0", "0000:81:00.0",
                                             "0000:c1:00.0"}));
  const auto& h200 = j["pci_gpus"][1];
  EXPECT_EQ(h200["vendor"], "NVIDIA");
  EXPECT_EQ(h200["device_id"], "0x2335");
  EXPECT_EQ(h200["driver"], "nvidia");
  EXPECT_EQ(h200["link_gen"], 5);
  EXPECT_EQ(h200["link_width"], 16);
  EXPECT_EQ(j["pci_gpus"][2]["link_gen"], 4);  // a downtrained link shows
  EXPECT_EQ(j["pci_gpus"][2]["max_link_gen"], 5);
  EXPECT_TRUE(j["pci_gpus"][3]["driver"].is_null());
  EXPECT_EQ(j["pci_gpus"][4]["vendor"], "AMD");
  EXPECT_EQ(j["pci_gpus"][0]["vendor"], "Intel");
}

TEST(InfoCli, MissingProcAndSysfsAreReportedNotFatal) {
  RunResult r = run_gpuopt({{"GPUOPT_NVML_LIBRARY", "/nonexistent"},
                            {"GPUOPT_SYSFS_ROOT", "/nonexistent/sys"},
                            {"GPUOPT_PROC_ROOT", "/nonexistent/proc"}},
                           "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cannot read /nonexistent/proc/cpuinfo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCI GPUs: n/a (cannot list /nonexistent/sys/bus/pci/devices"), std::string::npos) << r.out;
}

TEST(InfoCli, EnvTableMatchesDocs) {
  RunResult r = run_gpuopt({{"GPUOPT_LOG_LEVEL", "info"}}, "info --env --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_GE(j.size(), 6U);
  std::string doc = read_all(env_or("GPUOPT_TEST_SOURCE_DIR", ".") + "/docs/environment.md");
  ASSERT_FALSE(doc.empty()) << "docs/environment.md is missing";
  bool saw_level = false;
  for (const auto& v : j) {
    std::string name = v["name"];
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << name << " is not in docs/environment.md";
    if (name == "GPUOPT_LOG_LEVEL") {
      EXPECT_EQ(v["value"], "info");
      saw_level = true;
    }
  }
  EXPECT_TRUE(saw_level);
  RunResult t = run_gpuopt({}, "info --env");
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("GPUOPT_NVML_LIBRARY"), std::string::npos);
}

TEST(VersionCli, ReportsBuiltAndFoundLibraries) {
  RunResult r = run_gpuopt({}, "version --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("libraries"));
  for (const char* lib : {"cuda_driver", "cuda_runtime", "cublaslt", "cudnn"}) {
    const auto& l = j["libraries"]["found"][lib];
    ASSERT_TRUE(l.is_object()) << lib;
    // Either a version with the file it came from, or why not.
    if (l["version"].is_null()) EXPECT_FALSE(l["detail"].get<std::string>().empty()) << lib;
    else EXPECT_FALSE(l["path"].get<std::string>().empty()) << lib;
  }
  RunResult t = run_gpuopt({}, "version");
  ASSERT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("cuDNN"), std::string::npos) << t.out;
}

}  // namespace
}  // namespace gpuopt::testing
