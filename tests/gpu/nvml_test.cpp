// The NVML loader and typed queries against the fake library (tests/fake_nvml), both variants.
#include "monitor/nvml.h"

#include "gpu_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace gpuopt::nvml {
namespace {

using gpuopt::testing::data_dir;
using gpuopt::testing::fake_nvml;
using gpuopt::testing::fake_nvml_old;
using gpuopt::testing::temp_file;

std::shared_ptr<Nvml> load_fake(const std::string& lib, const std::string& script) {
  setenv("GPUOPT_FAKE_NVML_SCRIPT", script.c_str(), 1);
  auto r = Nvml::load(lib);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : nullptr;
}

const std::string kH200 = data_dir() + "/nvml_h200x2.json";

TEST(NvmlAbi, StructVersionsAreTheRealConstants) {
  // NVML_STRUCT_VERSION(Memory, 2) in nvml.h: sizeof(nvmlMemory_v2_t) | 2 << 24.
  EXPECT_EQ(kMemoryV2Version, 0x02000028U);
  EXPECT_NE(kMemoryV2Version, 2U);
  EXPECT_EQ(struct_version(sizeof(MemoryV2), 2) >> 24, 2U);
  EXPECT_EQ(offsetof(MemoryV2, total), 8U);
  EXPECT_EQ(offsetof(PciInfo, bus_id), 36U);
  EXPECT_EQ(offsetof(FieldValue, value), 32U);
  EXPECT_EQ(offsetof(GpmMetricsGet, metrics), 24U);
  EXPECT_EQ(offsetof(ProcessInfo, gpu_instance_id), 16U);
}

TEST(NvmlAbi, ReturnCodesMapToStatus) {
  auto e = call_error(kErrorNotSupported);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, StatusCode::kUnimplemented);
  EXPECT_NE(e->text.find("NVML_ERROR_NOT_SUPPORTED"), std::string::npos);
  EXPECT_FALSE(call_error(kSuccess));
  EXPECT_EQ(call_error(kErrorGpuIsLost)->code, StatusCode::kUnavailable);
  EXPECT_EQ(parse_return("GPU_IS_LOST"), kErrorGpuIsLost);
  EXPECT_EQ(parse_return("NVML_ERROR_TIMEOUT"), kErrorTimeout);
  EXPECT_FALSE(parse_return("NO_SUCH_ERROR"));
  // The checking macro names the call.
  auto f = []() -> Status {
    GPUOPT_CHECK_CALL(Return(kErrorNoPermission));
    return Status::Ok();
  };
  Status st = f();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("Insufficient Permissions"), std::string::npos) << st.message();
}

TEST(NvmlLoad, NoLibraryIsUnavailable) {
  auto r = Nvml::load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("NVML not found"), std::string::npos) << r.status().message();
}

TEST(NvmlLoad, LibraryWithoutRequiredSymbolIsUnusable) {
  auto r = Nvml::load("libc.so.6");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "NVML unusable: libc.so.6 lacks nvmlInit_v2");
}

TEST(NvmlLoad, InitFailureIsReported) {
  setenv("GPUOPT_FAKE_NVML_SCRIPT", temp_file(R"({"fail": {"nvmlInit": "DRIVER_NOT_LOADED"}})").c_str(), 1);
  auto r = Nvml::load(fake_nvml());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("Driver Not Loaded"), std::string::npos) << r.status().message();
}

TEST(NvmlNew, ResolvesNewestSymbols) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  const Api& a = nv->api();
  EXPECT_STREQ(a.init_symbol, "nvmlInit_v2");
  EXPECT_STREQ(a.device_get_pci_info_symbol, "nvmlDeviceGetPciInfo_v3");
  EXPECT_STREQ(a.device_get_compute_running_processes_symbol, "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_STREQ(a.device_get_current_clocks_event_reasons_symbol, "nvmlDeviceGetCurrentClocksEventReasons");
  EXPECT_STREQ(a.event_set_wait_symbol, "nvmlEventSetWait_v2");
  EXPECT_NE(a.gpm_metrics_get, nullptr);
}

TEST(NvmlNew, StaticAndDynamicQueries) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  EXPECT_EQ(*nv->driver_version(), "580.95.05");
  EXPECT_EQ(*nv->cuda_driver_version(), 13000);
  ASSERT_EQ(*nv->device_count(), 2U);
  Device d = *nv->device(0);
  EXPECT_EQ(*nv->name(d), "NVIDIA H200");
  EXPECT_EQ(*nv->pci_bus_id(d), "00000000:19:00.0");
  EXPECT_EQ(nv->compute_capability(d)->first, 9);
  // v2 struct with the real version word: the fake rejects anything else, so `reserved` proves it.
  auto m = nv->memory_info(d);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(m->reserved.has_value());
  EXPECT_EQ(*m->reserved, 603979776ULL);
  EXPECT_EQ(m->used, 541065216ULL);
  EXPECT_EQ(m->free, 150754820096ULL - 541065216ULL - 603979776ULL);
  EXPECT_EQ(*nv->power_limit_mw(d), 700000U);
  EXPECT_EQ(*nv->max_clock_mhz(d, kClockSm), 1980U);
  EXPECT_EQ(*nv->memory_temperature_c(d), 37);
  PcieLink l = nv->pcie_link(d);
  EXPECT_EQ(l.gen, 5U);
  EXPECT_EQ(l.width, 16U);
  EXPECT_EQ(*nv->clocks_event_reasons(d), kClocksEventGpuIdle);
  EXPECT_EQ(clocks_event_reasons_text(kClocksEventSwPowerCap | kClocksEventHwThermalSlowdown),
            "sw_power_cap,hw_thermal_slowdown");
  EccCounts ecc = nv->ecc_counts(d);
  EXPECT_EQ(ecc.corrected_aggregate, 3ULL);
}

TEST(NvmlNew, SequencesAdvancePerRead) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  Device d = *nv->device(0);
  EXPECT_EQ(nv->utilization(d)->gpu, 0U);
  EXPECT_EQ(nv->utilization(d)->gpu, 35U);
  EXPECT_EQ(nv->utilization(d)->gpu, 97U);
  EXPECT_EQ(nv->utilization(d)->gpu, 97U);  // the last value repeats
  EXPECT_EQ(*nv->total_energy_mj(d), 1000000ULL);
  EXPECT_EQ(*nv->total_energy_mj(d), 1074331ULL);
}

TEST(NvmlNew, ProcessesAndUtilisation) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  Device d = *nv->device(0);
  auto p = nv->processes(d);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->size(), 2U);
  EXPECT_EQ((*p)[0].pid, 4242U);
  EXPECT_EQ((*p)[0].used_memory, 1073741824ULL);
  EXPECT_FALSE((*p)[0].graphics);
  EXPECT_EQ((*p)[1].pid, 4343U);
  EXPECT_FALSE((*p)[1].used_memory) << "NVML_VALUE_NOT_AVAILABLE must read as unknown";
  EXPECT_TRUE((*p)[1].graphics);
  auto u = nv->process_utilization(d, 0);
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  ASSERT_EQ(u->size(), 1U);
  EXPECT_EQ((*u)[0].pid, 4242U);
  EXPECT_EQ((*u)[0].sm_util, 55U);
  // Nothing newer than the last sample's timestamp... until the next one.
  auto again = nv->process_utilization(d, (*u)[0].time_stamp);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 1U);
  EXPECT_GT((*again)[0].time_stamp, (*u)[0].time_stamp);
}

TEST(NvmlNew, GpmMetrics) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  Device d0 = *nv->device(0), d1 = *nv->device(1);
  EXPECT_TRUE(*nv->gpm_supported(d0));
  EXPECT_FALSE(*nv->gpm_supported(d1));
  auto a = GpmSampleHandle::alloc(nv);
  auto b = GpmSampleHandle::alloc(nv);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->take(d0).ok());
  ASSERT_TRUE(b->take(d0).ok());
  auto v = gpm_metrics(*nv, *a, *b, {kGpmSmUtil, kGpmAnyTensorUtil, kGpmDramBwUtil, kGpmFp64Util});
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_DOUBLE_EQ(*(*v)[0], 88.5);
  EXPECT_DOUBLE_EQ(*(*v)[1], 61.0);
  EXPECT_DOUBLE_EQ(*(*v)[2], 42.25);
  EXPECT_FALSE((*v)[3]) << "unscripted metric must be n/a";
  EXPECT_FALSE(a->take(d1).ok()) << "device 1 does not support GPM";
}

TEST(NvmlNew, XidEventsAndMig) {
  auto nv = load_fake(fake_nvml(), kH200);
  ASSERT_TRUE(nv);
  Device d0 = *nv->device(0), d1 = *nv->device(1);
  auto w = EventWatcher::create(nv, {d0, d1});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  auto first = (*w)->wait(10);  // the scripted XID comes after one wait
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());
  auto second = (*w)->wait(10);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->data, 79ULL);
  EXPECT_EQ((*second)->device, d0);
  auto third = (*w)->wait(10);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->has_value()) << "an XID is delivered once";

  EXPECT_EQ(nv->mig_mode(d0)->current, 0U);
  EXPECT_EQ(nv->mig_mode(d1)->current, 1U);
  auto migs = nv->mig_devices(d1);
  ASSERT_TRUE(migs.ok()) << migs.status().to_string();
  ASSERT_EQ(migs->size(), 1U);
  EXPECT_EQ(*nv->name((*migs)[0]), "NVIDIA H200 MIG 3g.71gb");
}

TEST(NvmlNew, InjectedFailuresNameTheCall) {
  auto nv = load_fake(fake_nvml(), temp_file(R"({
    "fail": {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED"},
    "devices": [{"name": "A", "power_usage_mw": 1000,
                 "fail": {"nvmlDeviceGetName": {"seq": ["SUCCESS", "GPU_IS_LOST"]}}}]})"));
  ASSERT_TRUE(nv);
  Device d = *nv->device(0);
  auto p = nv->power_usage_mw(d);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("nvmlDeviceGetPowerUsage"), std::string::npos) << p.status().message();
  EXPECT_EQ(*nv->name(d), "A");
  auto lost = nv->name(d);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable);
  // Unscripted fields are NOT_SUPPORTED.
  EXPECT_EQ(nv->temperature_c(d).status().code(), StatusCode::kUnimplemented);
}

TEST(NvmlOld, FallsBackToOlderSymbols) {
  auto nv = load_fake(fake_nvml_old(), kH200);
  ASSERT_TRUE(nv);
  const Api& a = nv->api();
  EXPECT_STREQ(a.init_symbol, "nvmlInit");
  EXPECT_STREQ(a.device_get_count_symbol, "nvmlDeviceGetCount");
  EXPECT_STREQ(a.device_get_pci_info_symbol, "nvmlDeviceGetPciInfo");
  EXPECT_STREQ(a.device_get_current_clocks_event_reasons_symbol, "nvmlDeviceGetCurrentClocksThrottleReasons");
  EXPECT_EQ(a.device_get_memory_info_v2, nullptr);
  EXPECT_EQ(a.device_get_compute_running_processes, nullptr);
  EXPECT_NE(a.device_get_compute_running_processes_v1, nullptr);
  EXPECT_EQ(a.gpm_metrics_get, nullptr);

  Device d = *nv->device(0);
  EXPECT_EQ(*nv->pci_bus_id(d), "0000:19:00.0");  // the legacy field of the v1 struct
  auto m = nv->memory_info(d);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->reserved) << "v1 memory has no reserved field";
  EXPECT_EQ(m->used, 541065216ULL + 603979776ULL) << "v1 counts reserved as used";
  auto p = nv->processes(d);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->size(), 2U);
  EXPECT_EQ((*p)[0].pid, 4242U);
  EXPECT_EQ((*p)[0].used_memory, 1073741824ULL);
  EXPECT_FALSE((*p)[0].gpu_instance_id);
  EXPECT_EQ(*nv->clocks_event_reasons(d), kClocksEventGpuIdle);
  auto gpm = nv->gpm_supported(d);
  ASSERT_FALSE(gpm.ok());
  EXPECT_EQ(gpm.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(gpm.status().message().find("lacks nvmlGpmQueryDeviceSupport"), std::string::npos);
  EXPECT_FALSE(GpmSampleHandle::alloc(nv).ok());
}

}  // namespace
}  // namespace gpuopt::nvml
