// Gathers SystemInfo: host, PCI, CUDA runtime and NVML, matched by PCI bus id.
#include "monitor/system_info.h"

#include "monitor/cuda_props.h"
#include "monitor/lib_versions.h"
#include "core/env.h"

#include <cctype>

namespace gpuopt {
namespace {

template <typename T>
std::optional<T> keep(const Result<T>& r, const char* what, NvidiaGpu* g) {
  if (r.ok()) return *r;
  g->unavailable.push_back(fmt::format("{}: {}", what, r.status().message()));
  return std::nullopt;
}

const char* compute_mode_name(nvml::ComputeMode m) {
  switch (m) {
    case nvml::kComputeModeDefault: return "default";
    case nvml::kComputeModeExclusiveThread: return "exclusive_thread";
    case nvml::kComputeModeProhibited: return "prohibited";
    case nvml::kComputeModeExclusiveProcess: return "exclusive_process";
  }
  return "unknown";
}

void fill_from_nvml(const nvml::Nvml& nv, nvml::Device d, NvidiaGpu* g) {
  g->name = keep(nv.name(d), "name", g);
  g->uuid = keep(nv.uuid(d), "uuid", g);
  g->pci_bus_id = keep(nv.pci_bus_id(d), "pci bus id", g);
  if (auto m = keep(nv.memory_info(d), "memory", g)) {
    g->mem_total_bytes = m->total;
    g->mem_free_bytes = m->free;
    g->mem_used_bytes = m->used;
    g->mem_reserved_bytes = m->reserved;
  }
  if (auto cc = keep(nv.compute_capability(d), "compute capability", g)) {
    g->cc_major = cc->first;
    g->cc_minor = cc->second;
  }
  g->max_sm_clock_mhz = keep(nv.max_clock_mhz(d, nvml::kClockSm), "max SM clock", g);
  g->max_mem_clock_mhz = keep(nv.max_clock_mhz(d, nvml::kClockMem), "max memory clock", g);
  if (auto w = keep(nv.memory_bus_width(d), "memory bus width", g)) g->mem_bus_width_bits = static_cast<int>(*w);
  auto watts = [](unsigned mw) { return mw / 1000.0; };
  if (auto p = keep(nv.power_limit_mw(d), "power limit", g)) g->power_limit_w = watts(*p);
  if (auto p = keep(nv.enforced_power_limit_mw(d), "enforced power limit", g)) g->enforced_power_limit_w = watts(*p);
  if (auto p = keep(nv.default_power_limit_mw(d), "default power limit", g)) g->default_power_limit_w = watts(*p);
  g->pcie = nv.pcie_link(d);
  if (!g->pcie.gen && !g->pcie.width) g->unavailable.push_back("pcie link: not reported");
  if (auto m = keep(nv.mig_mode(d), "mig mode", g)) {
    g->mig_enabled = m->current != 0;
    g->mig_pending = m->pending != 0;
  }
  if (auto p = keep(nv.persistence_mode(d), "persistence mode", g)) g->persistence_mode = *p == nvml::kFeatureEnabled;
  if (auto e = keep(nv.ecc_mode(d), "ecc mode", g)) g->ecc_enabled = *e == nvml::kFeatureEnabled;
  if (auto c = keep(nv.compute_mode(d), "compute mode", g)) g->compute_mode = compute_mode_name(*c);
  if (auto s = keep(nv.gpm_supported(d), "gpm", g)) g->gpm_supported = *s;
}

void fill_from_cuda(const CudaDeviceProps& p, NvidiaGpu* g) {
  g->cuda_index = p.index;
  if (!g->name) g->name = p.name;
  if (!g->uuid) g->uuid = p.uuid;
  if (!g->pci_bus_id) g->pci_bus_id = p.pci_bus_id;
  if (!g->mem_total_bytes) g->mem_total_bytes = p.total_mem_bytes;
  // The runtime is the authority for what kernels see: SMs, CC, bus width, L2.
  g->cc_major = p.cc_major;
  g->cc_minor = p.cc_minor;
  g->sm_count = p.sm_count;
  g->sm_count_from_nvml_cores = false;
  g->mem_bus_width_bits = p.mem_bus_width_bits;
  g->l2_bytes = p.l2_bytes;
  if (!g->max_sm_clock_mhz && p.sm_clock_khz > 0) g->max_sm_clock_mhz = static_cast<unsigned>(p.sm_clock_khz / 1000);
  if (!g->max_mem_clock_mhz && p.mem_clock_khz > 0) g->max_mem_clock_mhz = static_cast<unsigned>(p.mem_clock_khz / 1000);
}

void derive_spec(const nvml::Nvml* nv, nvml::Device d, NvidiaGpu* g) {
  if (!g->cc_major) return;
  const ArchSpec* arch = arch_spec(*g->cc_major, g->cc_minor.value_or(0));
  // Without the CUDA runtime: SMs = NVML's CUDA core count / cores per SM of the architecture.
  if (!g->sm_count && nv && d && arch) {
    if (auto cores = nv->num_gpu_cores(d); cores.ok() && *cores % arch->fp32_cores_per_sm == 0) {
      g->sm_count = static_cast<int>(*cores / arch->fp32_cores_per_sm);
      g->sm_count_from_nvml_cores = true;
    }
  }
  GpuProps props;
  props.cc_major = *g->cc_major;
  props.cc_minor = g->cc_minor.value_or(0);
  props.sm_count = g->sm_count.value_or(0);
  props.sm_clock_mhz = g->max_sm_clock_mhz.value_or(0);
  props.mem_clock_mhz = g->max_mem_clock_mhz.value_or(0);
  props.mem_bus_width_bits = g->mem_bus_width_bits.value_or(0);
  g->spec = spec_for(props);
}

}  // namespace

std::string normalize_bus_id(const std::string& id) {
  std::string s;
  for (char c : id) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto colon = s.find(':');
  // Domain part longer than 4 digits: keep the last 4 ("00000000" -> "0000").
  if (colon != std::string::npos && colon > 4) s = s.substr(colon - 4);
  return s;
}

SystemInfo collect_system_info() {
  SystemInfo s;
  s.host = read_host_info();
  s.pci_gpus = scan_pci_gpus(&s.pci_error);
  s.built_with_cuda = built_with_cuda();
  if (auto v = cuda_runtime_version_linked(); v.ok()) s.cuda_runtime_version = cuda_version_text(*v);

  std::vector<CudaDeviceProps> cuda;
  if (auto c = cuda_devices(); c.ok()) {
    cuda = *c;
    if (cuda.empty()) s.cuda_error = "CUDA runtime: no CUDA device";
  } else {
    s.cuda_error = c.status().message();
  }
  std::vector<bool> cuda_used(cuda.size(), false);

  auto loaded = nvml::Nvml::load();
  std::shared_ptr<nvml::Nvml> nv;
  if (loaded.ok()) {
    nv = *loaded;
    s.nvml_library = nv->library();
  } else {
    s.nvml_library = env_get("GPUOPT_NVML_LIBRARY").value_or("libnvidia-ml.so.1");
    s.nvml_error = loaded.status().message();
  }
  if (nv) {
    for (const auto& sym : nv->symbols())
      if (!sym.resolved) s.nvml_missing_symbols.push_back(sym.wanted);
    if (auto v = nv->driver_version(); v.ok()) s.driver_version = *v;
    if (auto v = nv->nvml_version(); v.ok()) s.nvml_version = *v;
    if (auto v = nv->cuda_driver_version(); v.ok()) s.cuda_driver_version = cuda_version_text(*v);
    auto count = nv->device_count();
    if (!count.ok()) {
      s.nvml_error = count.status().message();
    } else if (*count == 0) {
      s.nvml_error = fmt::format("NVML ({}) found no NVIDIA GPU", nv->library());
    }
    for (unsigned i = 0; count.ok() && i < *count; ++i) {
      NvidiaGpu g;
      g.index = i;
      auto d = nv->device(i);
      if (!d.ok()) {
        g.unavailable.push_back(fmt::format("device handle: {}", d.status().message()));
        s.gpus.push_back(std::move(g));
        continue;
      }
      fill_from_nvml(*nv, *d, &g);
      for (size_t c = 0; c < cuda.size(); ++c) {
        if (!cuda_used[c] && g.pci_bus_id && normalize_bus_id(cuda[c].pci_bus_id) == normalize_bus_id(*g.pci_bus_id)) {
          fill_from_cuda(cuda[c], &g);
          cuda_used[c] = true;
        }
      }
      derive_spec(nv.get(), *d, &g);
      s.gpus.push_back(std::move(g));
    }
  }
  // Devices the runtime sees that NVML did not give (no NVML at all, or a mismatch).
  for (size_t c = 0; c < cuda.size(); ++c) {
    if (cuda_used[c]) continue;
    NvidiaGpu g;
    g.index = static_cast<unsigned>(cuda[c].index);
    fill_from_cuda(cuda[c], &g);
    derive_spec(nullptr, nullptr, &g);
    s.gpus.push_back(std::move(g));
  }
  return s;
}

}  // namespace gpuopt
