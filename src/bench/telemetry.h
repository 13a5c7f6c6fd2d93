// Clocks, temperature and power of the GPU under test, read through NVML right after each
// measurement so every figure carries the state it was taken in. Without NVML (no driver, the
// CPU-only build) every field is absent and the tables print "n/a".
//
//   TelemetryReader tr = TelemetryReader::open("0000:19:00.0");  // CUDA's PCI bus id
//   m.telemetry = tr.sample();
#pragma once

#include "bench/result.h"

#include <memory>
#include <string>

namespace gpuopt::nvml {
class Nvml;
}

namespace gpuopt::bench {

class TelemetryReader {
 public:
  // Finds the NVML device with this PCI bus id (CUDA and NVML number devices differently when
  // CUDA_VISIBLE_DEVICES is set). Empty id or no match: a reader that samples nothing.
  static TelemetryReader open(const std::string& pci_bus_id);
  Telemetry sample() const;
  bool available() const { return nvml_ != nullptr; }

 private:
  std::shared_ptr<nvml::Nvml> nvml_;
  void* device_ = nullptr;  // nvml::Device
};

// "00000000:19:00.0" and "0000:19:00.0" name the same device: compare domain as a number and
// bus:device.function as text, case-insensitively.
bool same_pci_bus_id(const std::string& a, const std::string& b);

}  // namespace gpuopt::bench
