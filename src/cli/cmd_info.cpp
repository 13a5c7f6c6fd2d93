// `gpuopt info`: this machine's CPU, memory, PCI GPUs and, per NVIDIA GPU, what the CUDA runtime
// and NVML report plus theoretical peaks. `--env` lists the GPUOPT_* environment variables.
#include "cli/command.h"
#include "core/env.h"
#include "core/table.h"
#include "monitor/system_info.h"

#include <fmt/format.h>

#include <cctype>

namespace gpuopt::cli {
namespace {

struct Options {
  bool json = false;
  bool env = false;
  bool verbose = false;
};

const std::string kNa = "n/a";

template <typename T>
std::string or_na(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : kNa;
}

std::string yes_no(const std::optional<bool>& v, const char* yes = "enabled", const char* no = "disabled") {
  return v ? (*v ? yes : no) : kNa;
}

std::string class_name(uint32_t cls) {
  switch (cls >> 8) {
    case 0x0300: return "VGA";
    case 0x0302: return "3D controller";
    case 0x0380: return "display";
    case 0x1200: return "accelerator";
  }
  return fmt::format("0x{:06x}", cls);
}

std::string link_text(std::optional<int> gen, std::optional<int> width) {
  if (!gen && !width) return kNa;
  return fmt::format("gen {} x{}", gen ? std::to_string(*gen) : "?", width ? std::to_string(*width) : "?");
}

std::string host_text(const SystemInfo& s) {
  const HostInfo& h = s.host;
  Table t({"host", ""});
  t.add({"hostname", h.hostname.empty() ? kNa : h.hostname});
  std::string cpu = h.cpu_model.empty() ? kNa : h.cpu_model;
  std::string counts = fmt::format("{} logical CPUs", h.logical_cpus);
  if (h.physical_cores) counts = fmt::format("{} cores, {}", h.physical_cores, counts);
  if (h.sockets) counts = fmt::format("{} socket{}, {}", h.sockets, h.sockets > 1 ? "s" : "", counts);
  t.add({"CPU", fmt::format("{} ({})", cpu, counts)});
  std::string mem = h.mem_total_bytes ? format_bytes(static_cast<double>(*h.mem_total_bytes)) : kNa;
  if (h.mem_available_bytes) mem += fmt::format(" ({} available)", format_bytes(static_cast<double>(*h.mem_available_bytes)));
  t.add({"memory", mem});
  t.add({"kernel", h.kernel.empty() ? kNa : h.kernel});
  std::string out = t.render();
  for (const auto& e : h.errors) out += fmt::format("note: {}\n", e);
  return out;
}

std::string pci_text(const SystemInfo& s) {
  if (!s.pci_error.empty()) return fmt::format("PCI GPUs: n/a ({})\n", s.pci_error);
  if (s.pci_gpus.empty()) return "PCI GPUs: none found in sysfs\n";
  Table t({"PCI address", "vendor", "device", "class", "driver", "NUMA", "link", "max link"}, "GPUs on the PCI bus");
  for (const auto& p : s.pci_gpus) {
    t.add({p.address, p.vendor, fmt::format("{:04x}:{:04x}", p.vendor_id, p.device_id), class_name(p.class_code),
           p.driver.empty() ? "-" : p.driver, or_na(p.numa_node), link_text(p.link_gen, p.link_width),
           link_text(p.max_link_gen, p.max_link_width)});
  }
  return t.render();
}

std::string peak_text(const DeviceSpec& spec, PeakPrecision p) {
  auto v = spec.peak(p);
  if (!v) return spec.arch ? "not supported" : kNa;
  // TFLOP/s throughout, as datasheets and `gpuopt bench` print them.
  return fmt::format("{:.1f} {}", *v / 1e12, p == PeakPrecision::INT8 ? "TOP/s" : "TFLOP/s");
}

std::string gpu_text(const NvidiaGpu& g, bool verbose) {
  Table t({"field", "value"}, fmt::format("GPU {} · {}", g.index, g.name.value_or("unknown name")));
  t.add({"UUID", or_na(g.uuid)});
  t.add({"PCI bus id", or_na(g.pci_bus_id)});
  std::string mem = kNa;
  if (g.mem_total_bytes) {
    double total = static_cast<double>(*g.mem_total_bytes);
    mem = fmt::format("{} ({:.1f} GB) total", format_bytes(total), total / 1e9);
    if (g.mem_free_bytes) mem += fmt::format(", {} free", format_bytes(static_cast<double>(*g.mem_free_bytes)));
    if (g.mem_reserved_bytes) mem += fmt::format(", {} reserved", format_bytes(static_cast<double>(*g.mem_reserved_bytes)));
  }
  t.add({"memory", mem});
  const ArchSpec* a = g.spec.arch;
  std::string cc = g.cc_major ? fmt::format("{}.{}", *g.cc_major, g.cc_minor.value_or(0)) : kNa;
  if (g.cc_major) cc += a ? fmt::format(" ({}, {})", a->name, a->chips) : " (architecture not in the spec table)";
  t.add({"compute capability", cc});
  std::string sms = or_na(g.sm_count);
  if (g.sm_count && g.sm_count_from_nvml_cores) sms += " (from NVML core count)";
  t.add({"SMs", sms});
  t.add({"CUDA cores", a && g.sm_count ? std::to_string(g.spec.cuda_cores) : kNa});
  t.add({"tensor cores", a ? (a->tensor_core_gen ? fmt::format("generation {}", a->tensor_core_gen) : "none") : kNa});
  t.add({"max SM clock", g.max_sm_clock_mhz ? fmt::format("{} MHz", *g.max_sm_clock_mhz) : kNa});
  t.add({"max memory clock", g.max_mem_clock_mhz ? fmt::format("{} MHz", *g.max_mem_clock_mhz) : kNa});
  t.add({"memory bus", g.mem_bus_width_bits ? fmt::format("{}-bit", *g.mem_bus_width_bits) : kNa});
  t.add({"L2 cache", g.l2_bytes ? format_bytes(*g.l2_bytes) : kNa});
  t.add({"memory bandwidth (theoretical)",
         g.spec.mem_bandwidth_bytes_per_s ? format_rate(*g.spec.mem_bandwidth_bytes_per_s, "B/s") : kNa});
  std::string at = g.spec.sm_clock_mhz > 0 ? fmt::format(" @ {:.0f} MHz", g.spec.sm_clock_mhz) : "";
  for (PeakPrecision p : kAllPrecisions) {
    std::string name = peak_precision_name(p);
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string label = fmt::format("peak {}{}{}", name, p == PeakPrecision::FP32 ? "" : " tensor dense", at);
    t.add({label, peak_text(g.spec, p)});
  }
  std::string power = g.power_limit_w ? fmt::format("{:.0f} W", *g.power_limit_w) : kNa;
  if (g.enforced_power_limit_w) power += fmt::format(" (enforced {:.0f} W", *g.enforced_power_limit_w);
  if (g.enforced_power_limit_w && g.default_power_limit_w) power += fmt::format(", default {:.0f} W", *g.default_power_limit_w);
  if (g.enforced_power_limit_w) power += ")";
  t.add({"power limit", power});
  std::string pcie = link_text(g.pcie.gen ? std::optional<int>(*g.pcie.gen) : std::nullopt,
                               g.pcie.width ? std::optional<int>(*g.pcie.width) : std::nullopt);
  auto max_gen = g.pcie.gpu_max_gen ? g.pcie.gpu_max_gen : g.pcie.max_gen;
  if (max_gen || g.pcie.max_width)
    pcie += fmt::format(" (max {})", link_text(max_gen ? std::optional<int>(*max_gen) : std::nullopt,
                                              g.pcie.max_width ? std::optional<int>(*g.pcie.max_width) : std::nullopt));
  t.add({"PCIe link", pcie});
  std::string mig = yes_no(g.mig_enabled);
  if (g.mig_enabled && g.mig_pending && *g.mig_pending != *g.mig_enabled)
    mig += fmt::format(" ({} after reset)", *g.mig_pending ? "enabled" : "disabled");
  t.add({"MIG mode", mig});
  t.add({"persistence mode", yes_no(g.persistence_mode)});
  t.add({"ECC", yes_no(g.ecc_enabled)});
  t.add({"compute mode", or_na(g.compute_mode)});
  t.add({"GPM metrics", yes_no(g.gpm_supported, "supported", "not supported")});
  std::string out = t.render();
  if (verbose)
    for (const auto& u : g.unavailable) out += fmt::format("  n/a: {}\n", u);
  return out;
}

std::string driver_line(const SystemInfo& s) {
  std::string line = fmt::format("NVIDIA driver {} · CUDA driver API {} · NVML {} ({})", s.driver_version.value_or(kNa),
                                 s.cuda_driver_version.value_or(kNa), s.nvml_version.value_or(kNa), s.nvml_library);
  if (s.built_with_cuda) line += fmt::format(" · CUDA runtime {} (linked)", s.cuda_runtime_version.value_or(kNa));
  return line + "\n";
}

int run_info(const Options& o) {
  SystemInfo s = collect_system_info();
  if (o.json) {
    fmt::print("{}\n", system_info_json(s).dump(2));
    return kExitOk;
  }
  std::string out = host_text(s) + "\n" + pci_text(s) + "\n";
  if (s.gpus.empty()) {
    // One line, whatever the reason: no driver, no GPU, or both. NVML comes with the driver, so
    // without it (and, in a CUDA build, without libcuda.so.1) there is no driver at all.
    std::string why = s.nvml_error.value_or("NVML found no device");
    if (s.cuda_error && s.built_with_cuda) why += "; " + *s.cuda_error;
    const bool no_nvml = s.nvml_error && s.nvml_error->starts_with("NVML not found");
    const bool no_libcuda = !s.built_with_cuda || (s.cuda_error && s.cuda_error->find("libcuda.so.1 not found") != std::string::npos);
    if (no_nvml && no_libcuda)
      out += fmt::format("NVIDIA GPUs: none usable: no NVIDIA driver is installed ({}{}); gpuopt runs on the CPU\n",
                         *s.nvml_error, s.built_with_cuda ? "; libcuda.so.1 not found" : "");
    else out += fmt::format("NVIDIA GPUs: none usable ({})\n", why);
  } else {
    if (!s.nvml_error) out += driver_line(s);
    else out += fmt::format("NVML: n/a ({}); values below come from the CUDA runtime\n", *s.nvml_error);
    for (const auto& g : s.gpus) out += "\n" + gpu_text(g, o.verbose);
    if (!o.verbose && !s.gpus.empty()) {
      size_t missing = 0;
      for (const auto& g : s.gpus) missing += g.unavailable.size();
      if (missing) out += fmt::format("\n{} value(s) n/a; --verbose says why\n", missing);
    }
  }
  fmt::print("{}", out);
  return kExitOk;
}

int run_env(const Options& o) {
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : env_vars()) {
      auto cur = env_get(v.name);
      j.push_back({{"name", v.name}, {"default", v.default_value}, {"value", cur ? nlohmann::json(*cur) : nlohmann::json(nullptr)},
                   {"description", v.description}});
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  Table t({"variable", "default", "current", "description"}, "Environment variables (GPUOPT_*)");
  for (const auto& v : env_vars()) t.add({v.name, v.default_value, env_get(v.name).value_or("-"), v.description});
  fmt::print("{}", t.render());
  return kExitOk;
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe this machine: CPU, memory, GPUs, driver, theoretical peaks");
  auto opts = std::make_shared<Options>();
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_flag("--env", opts->env, "List the GPUOPT_* environment variables instead");
  cmd->add_flag("-v,--verbose", opts->verbose, "Say why each n/a value is missing");
  cmd->callback([opts] { set_exit_code(opts->env ? run_env(*opts) : run_info(*opts)); });
}
GPUOPT_REGISTER_COMMAND(10, setup);

}  // namespace
}  // namespace gpuopt::cli
