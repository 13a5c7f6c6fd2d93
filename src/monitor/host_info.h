// The host: CPU model, cores, memory (from procfs; GPUOPT_PROC_ROOT points tests at a fake tree)
// and every GPU-class device on the PCI bus (from sysfs; GPUOPT_SYSFS_ROOT likewise).
//
//   HostInfo h = read_host_info();              // fields absent in /proc stay empty/0
//   for (const PciGpu& g : scan_pci_gpus()) ... // NVIDIA, AMD and Intel display/accelerator functions
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

struct HostInfo {
  std::string hostname;
  std::string cpu_model;         // "AMD EPYC 9654 96-Core Processor"
  int logical_cpus = 0;          // processors in /proc/cpuinfo
  int physical_cores = 0;        // distinct (physical id, core id) pairs; 0 when not given
  int sockets = 0;
  std::optional<uint64_t> mem_total_bytes, mem_available_bytes;
  std::string kernel;            // /proc/sys/kernel/osrelease
  std::vector<std::string> errors;  // one line per file that could not be read
};

HostInfo read_host_info();

struct PciGpu {
  std::string address;  // "0000:19:00.0"
  uint16_t vendor_id = 0, device_id = 0;
  uint16_t subsystem_vendor_id = 0, subsystem_device_id = 0;
  uint32_t class_code = 0;  // 0x030200 = 3D controller
  std::string vendor;       // "NVIDIA", "AMD", "Intel"
  std::string driver;       // bound kernel driver ("nvidia", "amdgpu", "i915"), empty when none
  std::optional<int> numa_node;
  std::optional<int> link_gen, link_width, max_link_gen, max_link_width;  // from current_link_speed etc.
};

constexpr uint16_t kVendorNvidia = 0x10de;
constexpr uint16_t kVendorAmd = 0x1002;
constexpr uint16_t kVendorIntel = 0x8086;

// Display controllers (class 0x03) and processing accelerators (0x12) of the three vendors,
// sorted by address. An unreadable sysfs gives an empty list and *error (when given).
std::vector<PciGpu> scan_pci_gpus(std::string* error = nullptr);

// "8.0 GT/s PCIe" -> 3; nullopt for text it does not know.
std::optional<int> pcie_gen_from_speed(const std::string& speed);

}  // namespace gpuopt
