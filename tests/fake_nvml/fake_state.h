// State of the fake NVML library: the JSON script named by GPUOPT_FAKE_NVML_SCRIPT, the devices
// it describes, and per-field read counters that advance scripted sequences (README.md).
#pragma once

#include "monitor/nvml_types.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fake_nvml {

using gpuopt::nvml::Return;
using nlohmann::json;

struct FakeDevice {
  json j;                     // this device's object from the script
  unsigned index = 0;         // position in "devices" (or in the parent's "mig.devices")
  FakeDevice* parent = nullptr;
  std::vector<std::unique_ptr<FakeDevice>> mig;
  std::map<std::string, size_t> reads;  // field path -> reads so far
};

struct FakeEventSet {
  std::vector<std::pair<FakeDevice*, unsigned long long>> registered;
};

struct FakeGpmSample {
  FakeDevice* device = nullptr;
  bool taken = false;
};

struct State {
  std::mutex mu;
  int init_count = 0;
  json root;
  std::vector<std::unique_ptr<FakeDevice>> devices;
  std::map<std::string, size_t> reads;  // global field reads ("fail:<fn>")
  size_t event_waits = 0;
  std::vector<std::pair<const FakeDevice*, size_t>> delivered_xids;  // (device, index in its list)
  unsigned long long util_clock_us = 1'000'000;                      // process-utilisation timestamps
};

State& state();
// (Re)reads the script; returns the error text when it cannot.
std::optional<std::string> load_script(State& s);

// Value of a dotted field path on a device, after sequence expansion (nullopt when absent).
// {"seq": [...]} and bare arrays of scalars are sequences: the k-th read gives element k and the
// last one repeats.
// `counter` names the read counter (default: the path), so two functions that read one field
// (compute and graphics process lists) advance it independently; `advance` false only peeks.
std::optional<json> field(FakeDevice& d, const std::string& path, const std::string& counter = {},
                          bool advance = true);
// The same for a top-level script field.
std::optional<json> global_field(State& s, const std::string& path);

// Scripted failure of `fn` ("fail" maps on the device, then globally; key = exported symbol or
// its name without a _vN suffix). kSuccess when none.
Return failure(State& s, FakeDevice* d, const char* fn);

// Scripted cost of `fn`: busy-waits for "delay_us": {"<fn>": us} (device, then top level; same
// key rule as "fail") or GPUOPT_FAKE_NVML_DELAY_US="<fn>=us,...". Nothing when neither names it.
void delay(State& s, FakeDevice* d, const char* fn);

// "NOT_SUPPORTED" or "NVML_ERROR_NOT_SUPPORTED" -> code.
std::optional<Return> parse_error_name(std::string name);

FakeDevice* as_device(gpuopt::nvml::Device d);
gpuopt::nvml::Device as_handle(FakeDevice* d);

}  // namespace fake_nvml
