#include "gpu/sampler.h"

#include "core/log.h"
#include "gpu/nvml.h"
#include "gpu/process_info.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace gpuopt::gpu {

using namespace nvml;  // NOLINT: the ABI's names

namespace {

// Fields that may answer NOT_SUPPORTED; once they do, the sampler stops asking.
enum Field : size_t {
  kFUtil, kFMem, kFTemp, kFMemTemp, kFPower, kFPowerLimit, kFEnergy, kFSmClock, kFMemClock, kFPcie,
  kFReplay, kFReasons, kFEcc, kFMig, kFProcs, kFProcUtil, kFGpm, kFieldCount
};

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

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<double> parse_interval(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? std::string(end) : std::string();
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "m") scale = 60;
  if (end == text.c_str() || scale == 0 || !(v > 0) || v * scale > 86400)
    return Status::InvalidArgument("interval '{}': expected a positive duration like 1s, 500ms or 2", text);
  return v * scale;
}

struct Sampler::Impl {
  struct Dev {
    Device handle = nullptr;
    std::array<bool, kFieldCount> off{};
    bool lost = false;
    // GPM: two samples used alternately; metrics need the previous and the current one.
    std::optional<GpmSampleHandle> gpm[2];
    int gpm_cur = 0;
    bool gpm_have_prev = false;
    bool gpm_pcie = false;  // GPM gave PCIe bytes: skip the slower nvmlDeviceGetPcieThroughput
    unsigned long long last_proc_util_ts = 0;
    unsigned mig_max = 0;
    uint64_t xid_count = 0;
    std::optional<uint64_t> last_xid;
  };
  std::vector<Dev> devs;
  std::unique_ptr<GpmMetricsGet> gpm_req;       // ~13 KB, reused every tick
  std::vector<ProcessInfo> proc_buf;            // capacity kMaxProcessesPerGpu
  std::vector<ProcessInfoV1> proc_buf_v1;
  std::vector<ProcessUtilizationSample> util_buf;
  std::unique_ptr<EventWatcher> events;
  std::chrono::steady_clock::time_point last_tick{};
  bool have_last_tick = false;
};

Result<std::unique_ptr<Sampler>> Sampler::create(const SamplerOptions& options) {
  if (!(options.interval_s > 0)) return Status::InvalidArgument("sampling interval must be > 0 s");
  std::unique_ptr<Sampler> s(new Sampler());
  s->options_ = options;
  GPUOPT_ASSIGN_OR_RETURN(s->nvml_, Nvml::load());
  const Nvml& nv = *s->nvml_;
  if (auto v = nv.driver_version(); v.ok()) s->driver_.driver_version = *v;
  if (auto v = nv.nvml_version(); v.ok()) s->driver_.nvml_version = *v;
  if (auto v = nv.cuda_driver_version(); v.ok())
    s->driver_.cuda_driver_version = fmt::format("{}.{}", *v / 1000, (*v % 1000) / 10);
  GPUOPT_ASSIGN_OR_RETURN(unsigned count, nv.device_count());
  s->impl_ = std::make_unique<Impl>();
  Impl& im = *s->impl_;
  s->devices_.resize(count);
  im.devs.resize(count);
  std::vector<Device> handles;
  for (unsigned i = 0; i < count; ++i) {
    GPUOPT_ASSIGN_OR_RETURN(Device d, nv.device(i));
    handles.push_back(d);
    DeviceInfo& info = s->devices_[i];
    Impl::Dev& dev = im.devs[i];
    dev.handle = d;
    info.index = i;
    info.device = fmt::format("nvidia{}", i);
    if (auto v = nv.name(d); v.ok()) info.name = *v;
    if (auto v = nv.uuid(d); v.ok()) info.uuid = *v;
    if (auto v = nv.pci_bus_id(d); v.ok()) info.pci_bus_id = *v;
    if (auto v = nv.compute_capability(d); v.ok()) info.cc_major = v->first, info.cc_minor = v->second;
    if (auto v = nv.max_clock_mhz(d, kClockSm); v.ok()) info.sm_clock_max_mhz = *v;
    if (auto v = nv.max_clock_mhz(d, kClockMem); v.ok()) info.mem_clock_max_mhz = *v;
    if (options.gpm) {
      auto sup = nv.gpm_supported(d);
      if (sup.ok() && *sup) {
        auto a = GpmSampleHandle::alloc(s->nvml_);
        auto b = GpmSampleHandle::alloc(s->nvml_);
        if (a.ok() && b.ok()) {
          dev.gpm[0].emplace(std::move(*a));
          dev.gpm[1].emplace(std::move(*b));
          info.gpm_supported = true;
        }
      }
    }
    if (auto ecc = nv.ecc_mode(d); !ecc.ok() || *ecc != kFeatureEnabled) dev.off[kFEcc] = true;
    if (nv.api().device_get_max_mig_device_count) nv.api().device_get_max_mig_device_count(d, &dev.mig_max);
  }
  if (std::any_of(s->devices_.begin(), s->devices_.end(), [](const DeviceInfo& d) { return d.gpm_supported; })) {
    im.gpm_req = std::make_unique<GpmMetricsGet>();
  }
  im.proc_buf.resize(kMaxProcessesPerGpu);
  im.proc_buf_v1.resize(kMaxProcessesPerGpu);
  im.util_buf.resize(kMaxProcessesPerGpu * 4);
  if (options.events && count > 0) {
    auto w = EventWatcher::create(s->nvml_, handles, kEventXidCriticalError);
    if (w.ok()) im.events = std::move(*w);
    else GPUOPT_LOG(info, "XID events unavailable: {}", w.status().to_string());
  }
  s->snap_.gpus.resize(count);
  for (unsigned i = 0; i < count; ++i) {
    s->snap_.gpus[i].info = &s->devices_[i];
    s->snap_.gpus[i].processes.reserve(kMaxProcessesPerGpu);
  }
  return s;
}

Sampler::~Sampler() { stop(); }

const Snapshot& Sampler::sample() {
  const Api& api = nvml_->api();
  Impl& im = *impl_;
  auto t0 = std::chrono::steady_clock::now();
  double interval = im.have_last_tick ? std::chrono::duration<double>(t0 - im.last_tick).count() : 0.0;
  im.last_tick = t0;
  im.have_last_tick = true;
  snap_.timestamp_us = now_us();
  snap_.interval_s = interval;
  ++snap_.sequence;

  // XID events queued since the last tick (timeout 0: never blocks).
  if (im.events) {
    for (int guard = 0; guard < 256; ++guard) {
      auto e = im.events->wait(0);
      if (!e.ok() || !*e) break;
      for (auto& dev : im.devs)
        if (dev.handle == (*e)->device && ((*e)->type & kEventXidCriticalError)) ++dev.xid_count, dev.last_xid = (*e)->data;
    }
  }

  for (size_t i = 0; i < im.devs.size(); ++i) {
    Impl::Dev& dev = im.devs[i];
    GpuSample& g = snap_.gpus[i];
    // Keep the accumulated clock-event seconds and the buffers; reset everything else.
    auto seconds = g.clock_event_seconds;
    auto procs = std::move(g.processes);
    procs.clear();
    g = GpuSample{};
    g.info = &devices_[i];
    g.clock_event_seconds = seconds;
    g.processes = std::move(procs);
    Device d = dev.handle;
    // ok(): success; NOT_SUPPORTED turns the field off for good; GPU_IS_LOST marks the device.
    auto ok = [&](Field f, Return r) {
      if (r == kSuccess) return true;
      if (r == kErrorNotSupported || r == kErrorFunctionNotFound) dev.off[f] = true;
      if (r == kErrorGpuIsLost) dev.lost = true;
      return false;
    };
    auto want = [&](Field f, const void* fn) { return fn && !dev.off[f] && !dev.lost; };

    if (want(kFUtil, (const void*)api.device_get_utilization_rates)) {
      Utilization u{};
      if (ok(kFUtil, api.device_get_utilization_rates(d, &u))) g.gpu_util_pct = u.gpu, g.mem_util_pct = u.memory;
    }
    if (dev.lost) {
      g.lost = true;
      continue;
    }
    if (want(kFMem, (const void*)api.device_get_memory_info_v2) || want(kFMem, (const void*)api.device_get_memory_info)) {
      MemoryV2 m{};
      m.version = kMemoryV2Version;
      Return r = api.device_get_memory_info_v2 ? api.device_get_memory_info_v2(d, &m) : kErrorFunctionNotFound;
      if (r == kSuccess) {
        g.mem_total_bytes = m.total, g.mem_used_bytes = m.used, g.mem_free_bytes = m.free;
        g.mem_reserved_bytes = m.reserved;
      } else if (api.device_get_memory_info) {
        Memory m1{};
        if (ok(kFMem, api.device_get_memory_info(d, &m1)))  // v1: used includes reserved
          g.mem_total_bytes = m1.total, g.mem_used_bytes = m1.used, g.mem_free_bytes = m1.free;
      }
    }
    if (want(kFTemp, (const void*)api.device_get_temperature)) {
      unsigned t = 0;
      if (ok(kFTemp, api.device_get_temperature(d, kTemperatureGpu, &t))) g.temp_gpu_c = t;
    }
    if (want(kFMemTemp, (const void*)api.device_get_field_values)) {
      FieldValue fv{};
      fv.field_id = kFieldMemoryTemp;
      if (ok(kFMemTemp, api.device_get_field_values(d, 1, &fv))) {
        if (fv.nvml_return == kSuccess) {
          long long v = fv.value_type == kValueSignedInt ? fv.value.si_val : (long long)fv.value.ui_val;
          if (fv.value_type == kValueUnsignedLongLong) v = (long long)fv.value.ull_val;
          if (fv.value_type == kValueSignedLongLong) v = fv.value.sll_val;
          if (v > 0 && v < 200) g.temp_mem_c = unsigned(v);  // 0 means "no sensor" on some boards
        } else if (fv.nvml_return == kErrorNotSupported) {
          dev.off[kFMemTemp] = true;
        }
      }
    }
    if (want(kFPower, (const void*)api.device_get_power_usage)) {
      unsigned mw = 0;
      if (ok(kFPower, api.device_get_power_usage(d, &mw))) g.power_w = mw / 1000.0;
    }
    {
      auto fn = api.device_get_enforced_power_limit ? api.device_get_enforced_power_limit
                                                    : api.device_get_power_management_limit;
      unsigned mw = 0;
      if (want(kFPowerLimit, (const void*)fn) && ok(kFPowerLimit, fn(d, &mw))) g.power_limit_w = mw / 1000.0;
    }
    if (want(kFEnergy, (const void*)api.device_get_total_energy_consumption)) {
      unsigned long long mj = 0;
      if (ok(kFEnergy, api.device_get_total_energy_consumption(d, &mj))) g.energy_mj = mj;
    }
    if (want(kFSmClock, (const void*)api.device_get_clock_info)) {
      unsigned c = 0;
      if (ok(kFSmClock, api.device_get_clock_info(d, kClockSm, &c))) g.sm_clock_mhz = c;
    }
    if (want(kFMemClock, (const void*)api.device_get_clock_info)) {
      unsigned c = 0;
      if (ok(kFMemClock, api.device_get_clock_info(d, kClockMem, &c))) g.mem_clock_mhz = c;
    }
    if (want(kFReplay, (const void*)api.device_get_pcie_replay_counter)) {
      unsigned c = 0;
      if (ok(kFReplay, api.device_get_pcie_replay_counter(d, &c))) g.pcie_replay_count = c;
    }
    if (want(kFReasons, (const void*)api.device_get_current_clocks_event_reasons)) {
      unsigned long long m = 0;
      if (ok(kFReasons, api.device_get_current_clocks_event_reasons(d, &m))) {
        g.clock_event_reasons = m;
        for (size_t k = 0; k < kClockEventReasons.size(); ++k)
          if (m & kClockEventReasons[k].bit) g.clock_event_seconds[k] += interval;
      }
    }
    if (want(kFEcc, (const void*)api.device_get_total_ecc_errors)) {
      unsigned long long v = 0;
      if (ok(kFEcc, api.device_get_total_ecc_errors(d, kMemoryErrorCorrected, kVolatileEcc, &v))) g.ecc_corrected_volatile = v;
      if (!dev.off[kFEcc] && ok(kFEcc, api.device_get_total_ecc_errors(d, kMemoryErrorUncorrected, kVolatileEcc, &v))) g.ecc_uncorrected_volatile = v;
      if (!dev.off[kFEcc] && ok(kFEcc, api.device_get_total_ecc_errors(d, kMemoryErrorCorrected, kAggregateEcc, &v))) g.ecc_corrected_aggregate = v;
      if (!dev.off[kFEcc] && ok(kFEcc, api.device_get_total_ecc_errors(d, kMemoryErrorUncorrected, kAggregateEcc, &v))) g.ecc_uncorrected_aggregate = v;
    }
    if (im.events) g.xid_count = dev.xid_count;
    g.last_xid = dev.last_xid;
    if (want(kFMig, (const void*)api.device_get_mig_mode)) {
      unsigned cur = 0, pending = 0;
      if (ok(kFMig, api.device_get_mig_mode(d, &cur, &pending))) {
        g.mig_enabled = cur == 1;
        if (cur == 1 && api.device_get_mig_device_handle_by_index) {
          unsigned n = 0;
          for (unsigned k = 0; k < dev.mig_max; ++k) {
            Device md = nullptr;
            if (api.device_get_mig_device_handle_by_index(d, k, &md) == kSuccess) ++n;
          }
          g.mig_device_count = n;
        } else {
          g.mig_device_count = 0;
        }
      }
    }

    // GPM: a new sample each tick, metrics between it and the previous one.
    if (dev.gpm[0] && !dev.off[kFGpm]) {
      GpmSampleHandle& cur = *dev.gpm[dev.gpm_cur];
      GpmSampleHandle& prev = *dev.gpm[1 - dev.gpm_cur];
      Return r = api.gpm_sample_get(d, cur.get());
      if (!ok(kFGpm, r)) {
        dev.gpm_have_prev = false;
      } else {
        if (dev.gpm_have_prev && im.gpm_req && api.gpm_metrics_get) {
          GpmMetricsGet& q = *im.gpm_req;
          q.version = kGpmMetricsGetVersion;
          q.num_metrics = kGpmCount;
          q.sample1 = prev.get();
          q.sample2 = cur.get();
          for (size_t k = 0; k < kGpmCount; ++k) {
            q.metrics[k] = GpmMetric{};
            q.metrics[k].metric_id = kGpmMap[k].id;
          }
          if (api.gpm_metrics_get(&q) == kSuccess) {
            for (size_t k = 0; k < kGpmCount; ++k)
              if (q.metrics[k].nvml_return == kSuccess) g.gpm.*kGpmMap[k].field = kGpmMap[k].scale == kPercent ? q.metrics[k].value / 100.0
                                                                               : q.metrics[k].value * kGpmMap[k].scale;
            dev.gpm_pcie = g.gpm.pcie_tx_bytes_per_s.has_value();
          }
        }
        dev.gpm_have_prev = true;
        dev.gpm_cur = 1 - dev.gpm_cur;
      }
    }
    // nvmlDeviceGetPcieThroughput samples for 20 ms per call: only when GPM does not give it.
    if (!dev.gpm_pcie && want(kFPcie, (const void*)api.device_get_pcie_throughput)) {
      unsigned tx = 0, rx = 0;
      if (ok(kFPcie, api.device_get_pcie_throughput(d, kPcieUtilTxBytes, &tx)) &&
          ok(kFPcie, api.device_get_pcie_throughput(d, kPcieUtilRxBytes, &rx)))
        g.pcie_tx_kbps = tx, g.pcie_rx_kbps = rx;
    }

    if (options_.processes && !dev.off[kFProcs]) {
      // Compute then graphics processes, merged by pid, into the reserved vector.
      auto add = [&](unsigned pid, unsigned long long mem, char type) {
        for (auto& p : g.processes)
          if (p.pid == pid) {
            if (p.type != type) p.type = 'M';
            if (!p.gpu_memory_bytes && mem != kValueNotAvailable) p.gpu_memory_bytes = mem;
            return;
          }
        if (g.processes.size() >= kMaxProcessesPerGpu) return;
        ProcessSample& p = g.processes.emplace_back();
        p.pid = pid;
        p.type = type;
        if (mem != kValueNotAvailable) p.gpu_memory_bytes = mem;
      };
      auto list = [&](auto fn, auto fn_v1, char type) {
        unsigned n = kMaxProcessesPerGpu;
        if (fn) {
          Return r = fn(d, &n, im.proc_buf.data());
          if (r == kSuccess || r == kErrorInsufficientSize) {
            for (unsigned k = 0; k < std::min<unsigned>(n, kMaxProcessesPerGpu); ++k)
              add(im.proc_buf[k].pid, im.proc_buf[k].used_gpu_memory, type);
            return true;
          }
          return ok(kFProcs, r);
        }
        if (fn_v1) {
          Return r = fn_v1(d, &n, im.proc_buf_v1.data());
          if (r == kSuccess || r == kErrorInsufficientSize) {
            for (unsigned k = 0; k < std::min<unsigned>(n, kMaxProcessesPerGpu); ++k)
              add(im.proc_buf_v1[k].pid, im.proc_buf_v1[k].used_gpu_memory, type);
            return true;
          }
          return ok(kFProcs, r);
        }
        return false;
      };
      bool c = list(api.device_get_compute_running_processes, api.device_get_compute_running_processes_v1, 'C');
      bool gr = !dev.off[kFProcs] &&
                list(api.device_get_graphics_running_processes, api.device_get_graphics_running_processes_v1, 'G');
      g.processes_available = c || gr;
      if (g.processes_available && !dev.off[kFProcUtil] && api.device_get_process_utilization && !g.processes.empty()) {
        unsigned n = unsigned(im.util_buf.size());
        Return r = api.device_get_process_utilization(d, im.util_buf.data(), &n, dev.last_proc_util_ts);
        if (r == kSuccess) {
          // Several samples per pid may come back: keep the newest.
          unsigned long long newest = dev.last_proc_util_ts;
          for (auto& p : g.processes) {
            unsigned long long best = 0;
            for (unsigned k = 0; k < std::min<unsigned>(n, unsigned(im.util_buf.size())); ++k) {
              const auto& u = im.util_buf[k];
              if (u.pid != p.pid || u.time_stamp < best) continue;
              best = u.time_stamp;
              p.sm_util_pct = u.sm_util;
              p.mem_util_pct = u.mem_util;
            }
            newest = std::max(newest, best);
          }
          for (unsigned k = 0; k < std::min<unsigned>(n, unsigned(im.util_buf.size())); ++k)
            newest = std::max(newest, im.util_buf[k].time_stamp);
          dev.last_proc_util_ts = newest;
        } else if (r == kErrorInsufficientSize) {
          // The driver holds more samples than the buffer (first call on a busy GPU asks from 0):
          // skip what is queued and ask from now on.
          dev.last_proc_util_ts = uint64_t(snap_.timestamp_us);
        } else if (r == kErrorNotFound) {
          for (auto& p : g.processes) p.sm_util_pct = 0, p.mem_util_pct = 0;  // no activity since last tick
        } else {
          ok(kFProcUtil, r);
        }
      }
      for (auto& p : g.processes) fill_process_info(proc_root(), &p);
    }
  }
  snap_.sample_duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return snap_;
}

void Sampler::start(std::function<void(const Snapshot&)> on_sample, bool first_after_interval) {
  stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
    first_after_interval_ = first_after_interval;
    on_sample_ = std::move(on_sample);
  }
  thread_ = std::thread([this] { loop(); });
}

void Sampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::loop() {
  using clock = std::chrono::steady_clock;
  auto period = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(options_.interval_s));
  auto next = clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (first_after_interval_) {
    next += period;
    cv_.wait_until(lock, next, [this] { return stopping_; });
  }
  while (!stopping_) {
    lock.unlock();
    const Snapshot& s = sample();
    if (on_sample_) on_sample_(s);
    lock.lock();
    // Fixed-rate schedule; after a long stall skip the missed ticks instead of bursting.
    next += period;
    auto now = clock::now();
    if (next < now) next = now + period;
    cv_.wait_until(lock, next, [this] { return stopping_; });
  }
}

}  // namespace gpuopt::gpu
