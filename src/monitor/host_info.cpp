// Host CPU/memory from procfs and GPUs from sysfs (see host_info.h).
#include "monitor/host_info.h"

#include "core/env.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace gpuopt {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

std::optional<long long> parse_int(const std::string& s, int base = 10) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, base);
    if (used == 0) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

void read_cpuinfo(const fs::path& proc, HostInfo* h) {
  std::ifstream in(proc / "cpuinfo");
  if (!in) {
    h->errors.push_back(fmt::format("cannot read {}", (proc / "cpuinfo").string()));
    return;
  }
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> sockets;
  std::string line, phys, core;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (!phys.empty() || !core.empty()) cores.insert({phys, core});
      phys.clear();
      core.clear();
      continue;
    }
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "processor") ++h->logical_cpus;
    // x86 says "model name"; arm64 kernels give no model name, but lscpu-style "CPU part" lines.
    if ((key == "model name" || key == "Model" || key == "cpu model") && h->cpu_model.empty()) h->cpu_model = value;
    if (key == "physical id") {
      phys = value;
      sockets.insert(value);
    }
    if (key == "core id") core = value;
  }
  if (!phys.empty() || !core.empty()) cores.insert({phys, core});
  h->physical_cores = static_cast<int>(cores.size());
  h->sockets = static_cast<int>(sockets.size());
}

void read_meminfo(const fs::path& proc, HostInfo* h) {
  std::ifstream in(proc / "meminfo");
  if (!in) {
    h->errors.push_back(fmt::format("cannot read {}", (proc / "meminfo").string()));
    return;
  }
  std::string key, unit;
  unsigned long long value = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!(ls >> key >> value)) continue;
    ls >> unit;
    unsigned long long bytes = unit == "kB" ? value * 1024ULL : value;
    if (key == "MemTotal:") h->mem_total_bytes = bytes;
    if (key == "MemAvailable:") h->mem_available_bytes = bytes;
  }
}

const char* vendor_name(uint16_t v) {
  switch (v) {
    case kVendorNvidia: return "NVIDIA";
    case kVendorAmd: return "AMD";
    case kVendorIntel: return "Intel";
  }
  return nullptr;
}

}  // namespace

HostInfo read_host_info() {
  HostInfo h;
  fs::path proc = env_get("GPUOPT_PROC_ROOT").value_or("/proc");
  read_cpuinfo(proc, &h);
  read_meminfo(proc, &h);
  h.kernel = read_text(proc / "sys/kernel/osrelease").value_or("");
  h.hostname = read_text(proc / "sys/kernel/hostname").value_or("");
  if (h.hostname.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) h.hostname = buf;
  }
  return h;
}

std::optional<int> pcie_gen_from_speed(const std::string& speed) {
  // Per-lane signalling rate -> generation.
  static const std::pair<const char*, int> kRates[] = {{"2.5 GT/s", 1}, {"5.0 GT/s", 2},  {"5 GT/s", 2},
                                                       {"8.0 GT/s", 3}, {"8 GT/s", 3},    {"16.0 GT/s", 4},
                                                       {"16 GT/s", 4},  {"32.0 GT/s", 5}, {"32 GT/s", 5},
                                                       {"64.0 GT/s", 6}, {"64 GT/s", 6}};
  for (const auto& [text, gen] : kRates)
    if (speed.rfind(text, 0) == 0) return gen;
  return std::nullopt;
}

std::vector<PciGpu> scan_pci_gpus(std::string* error) {
  std::vector<PciGpu> out;
  fs::path root = fs::path(env_get("GPUOPT_SYSFS_ROOT").value_or("/sys")) / "bus/pci/devices";
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) {
    if (error) *error = fmt::format("cannot list {}: {}", root.string(), ec.message());
    return out;
  }
  for (const auto& entry : it) {
    fs::path dev = entry.path();
    auto cls = read_text(dev / "class");
    auto vendor = read_text(dev / "vendor");
    if (!cls || !vendor) continue;
    auto cls_v = parse_int(*cls, 16), vendor_v = parse_int(*vendor, 16);
    if (!cls_v || !vendor_v) continue;
    uint32_t base_class = static_cast<uint32_t>(*cls_v) >> 16;
    if (base_class != 0x03 && base_class != 0x12) continue;
    const char* vname = vendor_name(static_cast<uint16_t>(*vendor_v));
    if (!vname) continue;
    PciGpu g;
    g.address = dev.filename().string();
    g.vendor_id = static_cast<uint16_t>(*vendor_v);
    g.vendor = vname;
    g.class_code = static_cast<uint32_t>(*cls_v);
    auto hex = [&](const char* f) -> uint16_t {
      auto t = read_text(dev / f);
      auto v = t ? parse_int(*t, 16) : std::nullopt;
      return v ? static_cast<uint16_t>(*v) : 0;
    };
    g.device_id = hex("device");
    g.subsystem_vendor_id = hex("subsystem_vendor");
    g.subsystem_device_id = hex("subsystem_device");
    std::error_code lec;
    fs::path drv = fs::read_symlink(dev / "driver", lec);
    if (!lec) g.driver = drv.filename().string();
    if (auto n = read_text(dev / "numa_node")) {
      auto v = parse_int(*n);
      if (v && *v >= 0) g.numa_node = static_cast<int>(*v);
    }
    if (auto s = read_text(dev / "current_link_speed")) g.link_gen = pcie_gen_from_speed(*s);
    if (auto s = read_text(dev / "max_link_speed")) g.max_link_gen = pcie_gen_from_speed(*s);
    if (auto w = read_text(dev / "current_link_width")) {
      if (auto v = parse_int(*w); v && *v > 0) g.link_width = static_cast<int>(*v);
    }
    if (auto w = read_text(dev / "max_link_width")) {
      if (auto v = parse_int(*w); v && *v > 0) g.max_link_width = static_cast<int>(*v);
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const PciGpu& a, const PciGpu& b) { return a.address < b.address; });
  return out;
}

}  // namespace gpuopt
