// One read function per query group (sampler_types.h QueryGroup). Each clears its own fields
// first, so a read that fails leaves n/a rather than the previous value; the fields of groups not
// read in a sample keep the values of their last read (the slow cadence).
#include "core/log.h"
#include "monitor/process_info.h"
#include "monitor/sampler_impl.h"

#include <algorithm>

namespace gpuopt::gpu {

using namespace nvml;  // NOLINT: the ABI's names

namespace {

// GPM metrics read each tick, and where each goes (NVML gives % and MiB/s; we store ratios and B/s).
struct GpmMap {
  GpmMetricId id;
  std::optional<double> GpmSample::*field;
  double scale;
};
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kPercent = 0.01;  // divided by 100 (not multiplied by 0.01: 70 -> 0.7 exactly)
const GpmMap kGpmMap[] = {
    {kGpmGraphicsUtil, &gpu::GpmSample::graphics_active, kPercent},
    {kGpmSmUtil, &gpu::GpmSample::sm_active, kPercent},
    {kGpmSmOccupancy, &gpu::GpmSample::sm_occupancy, kPercent},
    {kGpmAnyTensorUtil, &gpu::GpmSample::tensor_active, kPercent},
    {kGpmDramBwUtil, &gpu::GpmSample::dram_active, kPercent},
    {kGpmFp64Util, &gpu::GpmSample::fp64_active, kPercent},
    {kGpmFp32Util, &gpu::GpmSample::fp32_active, kPercent},
    {kGpmFp16Util, &gpu::GpmSample::fp16_active, kPercent},
    {kGpmPcieTxPerSec, &gpu::GpmSample::pcie_tx_bytes_per_s, kMiB},
    {kGpmPcieRxPerSec, &gpu::GpmSample::pcie_rx_bytes_per_s, kMiB},
    {static_cast<GpmMetricId>(61), &gpu::GpmSample::nvlink_tx_bytes_per_s, kMiB},  // NVLINK_TOTAL_TX_PER_SEC
    {static_cast<GpmMetricId>(60), &gpu::GpmSample::nvlink_rx_bytes_per_s, kMiB},  // NVLINK_TOTAL_RX_PER_SEC
};
constexpr size_t kGpmCount = sizeof(kGpmMap) / sizeof(kGpmMap[0]);

bool read_utilization(QueryCtx& c) {
  c.g.gpu_util_pct.reset(), c.g.mem_util_pct.reset();
  if (!c.want(kFUtil, (const void*)c.api.device_get_utilization_rates)) return false;
  Utilization u{};
  if (c.ok(kFUtil, c.api.device_get_utilization_rates(c.dev.handle, &u)))
    c.g.gpu_util_pct = u.gpu, c.g.mem_util_pct = u.memory;
  return true;
}

bool read_memory(QueryCtx& c) {
  GpuSample& g = c.g;
  g.mem_total_bytes.reset(), g.mem_used_bytes.reset(), g.mem_free_bytes.reset(), g.mem_reserved_bytes.reset();
  if (!c.want(kFMem, (const void*)c.api.device_get_memory_info_v2) &&
      !c.want(kFMem, (const void*)c.api.device_get_memory_info))
    return false;
  MemoryV2 m{};
  m.version = kMemoryV2Version;
  Return r =
      c.api.device_get_memory_info_v2 ? c.api.device_get_memory_info_v2(c.dev.handle, &m) : kErrorFunctionNotFound;
  if (r == kSuccess) {
    g.mem_total_bytes = m.total, g.mem_used_bytes = m.used, g.mem_free_bytes = m.free;
    g.mem_reserved_bytes = m.reserved;
  } else if (c.api.device_get_memory_info) {
    Memory m1{};
    if (c.ok(kFMem, c.api.device_get_memory_info(c.dev.handle, &m1)))  // v1: used includes reserved
      g.mem_total_bytes = m1.total, g.mem_used_bytes = m1.used, g.mem_free_bytes = m1.free;
  }
  return true;
}

bool read_temperature(QueryCtx& c) {
  c.g.temp_gpu_c.reset();
  if (!c.want(kFTemp, (const void*)c.api.device_get_temperature)) return false;
  unsigned t = 0;
  if (c.ok(kFTemp, c.api.device_get_temperature(c.dev.handle, kTemperatureGpu, &t))) c.g.temp_gpu_c = t;
  return true;
}

bool read_memory_temperature(QueryCtx& c) {
  c.g.temp_mem_c.reset();
  if (!c.want(kFMemTemp, (const void*)c.api.device_get_field_values)) return false;
  FieldValue fv{};
  fv.field_id = kFieldMemoryTemp;
  if (c.ok(kFMemTemp, c.api.device_get_field_values(c.dev.handle, 1, &fv))) {
    if (fv.nvml_return == kSuccess) {
      long long v = fv.value_type == kValueSignedInt ? fv.value.si_val : (long long)fv.value.ui_val;
      if (fv.value_type == kValueUnsignedLongLong) v = (long long)fv.value.ull_val;
      if (fv.value_type == kValueSignedLongLong) v = fv.value.sll_val;
      if (v > 0 && v < 200) c.g.temp_mem_c = unsigned(v);  // 0 means "no sensor" on some boards
    } else if (fv.nvml_return == kErrorNotSupported) {
      c.dev.off[kFMemTemp] = true;
    }
  }
  return true;
}

bool read_power(QueryCtx& c) {
  c.g.power_w.reset();
  if (!c.want(kFPower, (const void*)c.api.device_get_power_usage)) return false;
  unsigned mw = 0;
  if (c.ok(kFPower, c.api.device_get_power_usage(c.dev.handle, &mw))) c.g.power_w = mw / 1000.0;
  return true;
}

bool read_power_limit(QueryCtx& c) {
  c.g.power_limit_w.reset();
  auto fn = c.api.device_get_enforced_power_limit ? c.api.device_get_enforced_power_limit
                                                  : c.api.device_get_power_management_limit;
  if (!c.want(kFPowerLimit, (const void*)fn)) return false;
  unsigned mw = 0;
  if (c.ok(kFPowerLimit, fn(c.dev.handle, &mw))) c.g.power_limit_w = mw / 1000.0;
  return true;
}

bool read_energy(QueryCtx& c) {
  c.g.energy_mj.reset();
  if (!c.want(kFEnergy, (const void*)c.api.device_get_total_energy_consumption)) return false;
  unsigned long long mj = 0;
  if (c.ok(kFEnergy, c.api.device_get_total_energy_consumption(c.dev.handle, &mj))) c.g.energy_mj = mj;
  return true;
}

bool read_clocks(QueryCtx& c) {
  c.g.sm_clock_mhz.reset(), c.g.mem_clock_mhz.reset();
  bool called = false;
  unsigned v = 0;
  if (c.want(kFSmClock, (const void*)c.api.device_get_clock_info)) {
    called = true;
    if (c.ok(kFSmClock, c.api.device_get_clock_info(c.dev.handle, kClockSm, &v))) c.g.sm_clock_mhz = v;
  }
  if (c.want(kFMemClock, (const void*)c.api.device_get_clock_info)) {
    called = true;
    if (c.ok(kFMemClock, c.api.device_get_clock_info(c.dev.handle, kClockMem, &v))) c.g.mem_clock_mhz = v;
  }
  return called;
}

bool read_clock_event_reasons(QueryCtx& c) {
  c.g.clock_event_reasons.reset();
  if (!c.want(kFReasons, (const void*)c.api.device_get_current_clocks_event_reasons)) return false;
  unsigned long long m = 0;
  if (c.ok(kFReasons, c.api.device_get_current_clocks_event_reasons(c.dev.handle, &m))) {
    c.g.clock_event_reasons = m;
    // The reasons active now are counted for the time since the last read (one interval when
    // read every sample, N on the slow cadence).
    for (size_t k = 0; k < kClockEventReasons.size(); ++k)
      if (m & kClockEventReasons[k].bit) c.g.clock_event_seconds[k] += c.elapsed_s;
  }
  return true;
}

bool read_pcie_replay(QueryCtx& c) {
  c.g.pcie_replay_count.reset();
  if (!c.want(kFReplay, (const void*)c.api.device_get_pcie_replay_counter)) return false;
  unsigned v = 0;
  if (c.ok(kFReplay, c.api.device_get_pcie_replay_counter(c.dev.handle, &v))) c.g.pcie_replay_count = v;
  return true;
}

bool read_pcie_throughput(QueryCtx& c) {
  c.g.pcie_tx_kbps.reset(), c.g.pcie_rx_kbps.reset();
  // nvmlDeviceGetPcieThroughput samples for 20 ms per call: only when GPM does not give PCIe bytes.
  if (c.dev.gpm_pcie || !c.want(kFPcie, (const void*)c.api.device_get_pcie_throughput)) return false;
  unsigned tx = 0, rx = 0;
  if (c.ok(kFPcie, c.api.device_get_pcie_throughput(c.dev.handle, kPcieUtilTxBytes, &tx)) &&
      c.ok(kFPcie, c.api.device_get_pcie_throughput(c.dev.handle, kPcieUtilRxBytes, &rx)))
    c.g.pcie_tx_kbps = tx, c.g.pcie_rx_kbps = rx;
  return true;
}

bool read_ecc(QueryCtx& c) {
  GpuSample& g = c.g;
  g.ecc_corrected_volatile.reset(), g.ecc_uncorrected_volatile.reset();
  g.ecc_corrected_aggregate.reset(), g.ecc_uncorrected_aggregate.reset();
  if (!c.want(kFEcc, (const void*)c.api.device_get_total_ecc_errors)) return false;
  const auto fn = c.api.device_get_total_ecc_errors;
  Device d = c.dev.handle;
  unsigned long long v = 0;
  if (c.ok(kFEcc, fn(d, kMemoryErrorCorrected, kVolatileEcc, &v))) g.ecc_corrected_volatile = v;
  if (!c.dev.off[kFEcc] && c.ok(kFEcc, fn(d, kMemoryErrorUncorrected, kVolatileEcc, &v)))
    g.ecc_uncorrected_volatile = v;
  if (!c.dev.off[kFEcc] && c.ok(kFEcc, fn(d, kMemoryErrorCorrected, kAggregateEcc, &v))) g.ecc_corrected_aggregate = v;
  if (!c.dev.off[kFEcc] && c.ok(kFEcc, fn(d, kMemoryErrorUncorrected, kAggregateEcc, &v)))
    g.ecc_uncorrected_aggregate = v;
  return true;
}

bool read_mig(QueryCtx& c) {
  c.g.mig_enabled.reset(), c.g.mig_device_count.reset();
  if (!c.want(kFMig, (const void*)c.api.device_get_mig_mode)) return false;
  unsigned cur = 0, pending = 0;
  if (c.ok(kFMig, c.api.device_get_mig_mode(c.dev.handle, &cur, &pending))) {
    c.g.mig_enabled = cur == 1;
    unsigned n = 0;
    if (cur == 1 && c.api.device_get_mig_device_handle_by_index) {
      for (unsigned k = 0; k < c.dev.mig_max; ++k) {
        Device md = nullptr;
        if (c.api.device_get_mig_device_handle_by_index(c.dev.handle, k, &md) == kSuccess) ++n;
      }
    }
    c.g.mig_device_count = n;
  }
  return true;
}

// GPM: a new sample each read, metrics between it and the previous one (over N intervals when
// read on the slow cadence: still an average activity, over a longer window).
bool read_gpm(QueryCtx& c) {
  c.g.gpm = GpmSample{};
  Sampler::Impl::Dev& dev = c.dev;
  if (!dev.gpm[0] || dev.off[kFGpm] || dev.lost) return false;
  GpmSampleHandle& cur = *dev.gpm[dev.gpm_cur];
  GpmSampleHandle& prev = *dev.gpm[1 - dev.gpm_cur];
  if (!c.ok(kFGpm, c.api.gpm_sample_get(dev.handle, cur.get()))) {
    dev.gpm_have_prev = false;
    return true;
  }
  if (dev.gpm_have_prev && c.im.gpm_req && c.api.gpm_metrics_get) {
    GpmMetricsGet& q = *c.im.gpm_req;
    q.version = kGpmMetricsGetVersion;
    q.num_metrics = kGpmCount;
    q.sample1 = prev.get();
    q.sample2 = cur.get();
    for (size_t k = 0; k < kGpmCount; ++k) {
      q.metrics[k] = GpmMetric{};
      q.metrics[k].metric_id = kGpmMap[k].id;
    }
    if (c.api.gpm_metrics_get(&q) == kSuccess) {
      for (size_t k = 0; k < kGpmCount; ++k)
        if (q.metrics[k].nvml_return == kSuccess)
          c.g.gpm.*kGpmMap[k].field =
              kGpmMap[k].scale == kPercent ? q.metrics[k].value / 100.0 : q.metrics[k].value * kGpmMap[k].scale;
      dev.gpm_pcie = c.g.gpm.pcie_tx_bytes_per_s.has_value();
      // From now on GPM gives PCIe bytes: the NVML counter (read before GPM had two samples) is
      // neither read nor exported, whatever its cadence.
      if (dev.gpm_pcie) c.g.pcie_tx_kbps.reset(), c.g.pcie_rx_kbps.reset();
    }
  }
  dev.gpm_have_prev = true;
  dev.gpm_cur = 1 - dev.gpm_cur;
  return true;
}

// Compute then graphics processes, merged by pid. Utilisation and /proc details of a pid that
// was listed before are carried over: their own groups refresh them on their cadence.
bool read_process_list(QueryCtx& c) {
  Sampler::Impl& im = c.im;
  Sampler::Impl::Dev& dev = c.dev;
  GpuSample& g = c.g;
  std::swap(dev.prev_procs, g.processes);  // both keep their reserved capacity
  g.processes.clear();
  g.processes_available = false;
  if (!c.processes || dev.off[kFProcs] || dev.lost) return false;
  auto add = [&](unsigned pid, unsigned long long mem, char type) {
    for (auto& p : g.processes)
      if (p.pid == pid) {
        if (p.type != type) p.type = 'M';
        if (!p.gpu_memory_bytes && mem != kValueNotAvailable) p.gpu_memory_bytes = mem;
        return;
      }
    if (g.processes.size() >= kMaxProcessesPerGpu) return;
    ProcessSample& p = g.processes.emplace_back();
    for (const ProcessSample& old : dev.prev_procs)
      if (old.pid == pid) {
        p = old;
        p.gpu_memory_bytes.reset();
        break;
      }
    p.pid = pid;
    p.type = type;
    if (mem != kValueNotAvailable) p.gpu_memory_bytes = mem;
  };
  // One process-list call into `buf` (the current struct layout or the v1 one).
  auto read = [&](auto fn, auto& buf, char type) -> bool {
    unsigned n = kMaxProcessesPerGpu;
    const Return r = fn(dev.handle, &n, buf.data());
    if (r != kSuccess && r != kErrorInsufficientSize) return c.ok(kFProcs, r);
    for (unsigned k = 0; k < std::min<unsigned>(n, kMaxProcessesPerGpu); ++k) add(buf[k].pid, buf[k].used_gpu_memory, type);
    return true;
  };
  auto list = [&](auto fn, auto fn_v1, char type) -> bool {
    if (fn) return read(fn, im.proc_buf, type);
    if (fn_v1) return read(fn_v1, im.proc_buf_v1, type);
    return false;
  };
  const Api& api = c.api;
  bool cl = list(api.device_get_compute_running_processes, api.device_get_compute_running_processes_v1, 'C');
  bool gr = !dev.off[kFProcs] &&
            list(api.device_get_graphics_running_processes, api.device_get_graphics_running_processes_v1, 'G');
  g.processes_available = cl || gr;
  return true;
}

bool read_process_utilization(QueryCtx& c) {
  Sampler::Impl& im = c.im;
  Sampler::Impl::Dev& dev = c.dev;
  GpuSample& g = c.g;
  for (auto& p : g.processes) p.sm_util_pct.reset(), p.mem_util_pct.reset();
  if (!g.processes_available || dev.off[kFProcUtil] || dev.lost || !c.api.device_get_process_utilization ||
      g.processes.empty())
    return false;
  unsigned n = unsigned(im.util_buf.size());
  Return r = c.api.device_get_process_utilization(dev.handle, im.util_buf.data(), &n, dev.last_proc_util_ts);
  if (r == kSuccess) {
    // Several samples per pid may come back: keep the newest.
    const unsigned got = std::min<unsigned>(n, unsigned(im.util_buf.size()));
    unsigned long long newest = dev.last_proc_util_ts;
    for (auto& p : g.processes) {
      unsigned long long best = 0;
      for (unsigned k = 0; k < got; ++k) {
        const auto& u = im.util_buf[k];
        if (u.pid != p.pid || u.time_stamp < best) continue;
        best = u.time_stamp;
        p.sm_util_pct = u.sm_util;
        p.mem_util_pct = u.mem_util;
      }
    }
    for (unsigned k = 0; k < got; ++k) newest = std::max(newest, im.util_buf[k].time_stamp);
    dev.last_proc_util_ts = newest;
  } else if (r == kErrorInsufficientSize) {
    // The driver holds more samples than the buffer (first call on a busy GPU asks from 0):
    // skip what is queued and ask from now on.
    dev.last_proc_util_ts = uint64_t(c.now_us);
  } else if (r == kErrorNotFound) {
    for (auto& p : g.processes) p.sm_util_pct = 0, p.mem_util_pct = 0;  // no activity since the last read
  } else {
    c.ok(kFProcUtil, r);
  }
  return true;
}

// User, command line and container id from /proc: every process when the group is due.
bool read_proc_files(QueryCtx& c) {
  if (!c.processes || c.g.processes.empty()) return false;
  for (auto& p : c.g.processes) {
    fill_process_info(proc_root(), &p);
    p.proc_read = true;
  }
  return true;
}

}  // namespace

bool read_query_group(QueryGroup q, QueryCtx& c) {
  switch (q) {
    case QueryGroup::kUtilization:
      return read_utilization(c);
    case QueryGroup::kMemory:
      return read_memory(c);
    case QueryGroup::kTemperature:
      return read_temperature(c);
    case QueryGroup::kMemoryTemperature:
      return read_memory_temperature(c);
    case QueryGroup::kPower:
      return read_power(c);
    case QueryGroup::kPowerLimit:
      return read_power_limit(c);
    case QueryGroup::kEnergy:
      return read_energy(c);
    case QueryGroup::kClocks:
      return read_clocks(c);
    case QueryGroup::kClockEventReasons:
      return read_clock_event_reasons(c);
    case QueryGroup::kPcieReplay:
      return read_pcie_replay(c);
    case QueryGroup::kPcieThroughput:
      return read_pcie_throughput(c);
    case QueryGroup::kEcc:
      return read_ecc(c);
    case QueryGroup::kMig:
      return read_mig(c);
    case QueryGroup::kGpm:
      return read_gpm(c);
    case QueryGroup::kProcessList:
      return read_process_list(c);
    case QueryGroup::kProcessUtilization:
      return read_process_utilization(c);
    case QueryGroup::kProcFiles:
      return read_proc_files(c);
    case QueryGroup::kXidEvents:  // per sampler, not per GPU: sampler.cpp polls the event set
    case QueryGroup::kCount:
      break;
  }
  return false;
}

}  // namespace gpuopt::gpu
