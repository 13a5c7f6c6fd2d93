#include "monitor/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpuopt::gpu {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "?";
}

const char* rule_name(Rule r) {
  switch (r) {
#define GPUOPT_X(e, name) \
  case Rule::e: return name;
    GPUOPT_DIAGNOSIS_RULES(GPUOPT_X)
#undef GPUOPT_X
  }
  return "?";
}

std::string xid_text(uint64_t xid) {
  // The XIDs seen in practice on data-centre GPUs (NVIDIA's XID catalogue).
  const char* t = nullptr;
  switch (xid) {
    case 13: t = "graphics engine exception (often an application bug: illegal address, assert)"; break;
    case 31: t = "GPU memory page fault (application touched an invalid address)"; break;
    case 32: t = "invalid or corrupted push buffer stream"; break;
    case 43: t = "GPU stopped processing (the faulting application was stopped)"; break;
    case 45: t = "preemptive cleanup after a previous error"; break;
    case 48: t = "double-bit ECC error"; break;
    case 61: case 62: t = "internal micro-controller error"; break;
    case 63: t = "ECC page retirement or row remapping recorded"; break;
    case 64: t = "ECC page retirement or row remapping failed"; break;
    case 68: t = "video processor exception"; break;
    case 74: t = "NVLink error"; break;
    case 79: t = "GPU has fallen off the bus"; break;
    case 92: t = "high single-bit ECC error rate"; break;
    case 94: t = "contained ECC error (affected application must restart)"; break;
    case 95: t = "uncontained ECC error (GPU reset required)"; break;
    case 119: case 120: t = "GSP firmware error or timeout"; break;
    default: break;
  }
  return t ? fmt::format("XID {}: {}", xid, t) : fmt::format("XID {}", xid);
}

Diagnoser::Diagnoser(DiagnosisConfig config) : config_(config) {
  if (config_.window < 1) config_.window = 1;
}

const Diagnoser::Point& Diagnoser::Ring::at(size_t i) const {
  size_t cap = points.size();
  return points[(next + cap - size + i) % cap];
}

static std::optional<double> opt_d(const std::optional<unsigned>& v) {
  return v ? std::optional<double>(*v) : std::nullopt;
}

void Diagnoser::add(const Snapshot& s) {
  if (rings_.size() != s.gpus.size()) {  // first sample (or the device set changed): start over
    rings_.assign(s.gpus.size(), Ring{});
    for (auto& r : rings_) r.points.resize(config_.window);
    indices_.assign(s.gpus.size(), 0);
  }
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuSample& g = s.gpus[i];
    if (g.info) {
      indices_[i] = g.info->index;
    } else {
      indices_[i] = static_cast<unsigned>(i);
    }
    Ring& r = rings_[i];
    Point& p = r.points[r.next];
    p = Point{};
    p.lost = g.lost;
    p.util = opt_d(g.gpu_util_pct);
    p.mem_util = opt_d(g.mem_util_pct);
    p.mem_fraction = memory_used_fraction(g);
    p.temp = opt_d(g.temp_gpu_c);
    p.power = g.power_w;
    p.power_limit = g.power_limit_w;
    p.sm_clock = opt_d(g.sm_clock_mhz);
    if (g.gpm.pcie_tx_bytes_per_s && g.gpm.pcie_rx_bytes_per_s) {
      p.pcie_bytes_per_s = *g.gpm.pcie_tx_bytes_per_s + *g.gpm.pcie_rx_bytes_per_s;
    } else if (g.pcie_tx_kbps && g.pcie_rx_kbps) {
      p.pcie_bytes_per_s = double(*g.pcie_tx_kbps + *g.pcie_rx_kbps) * 1024.0;
    }
    p.reasons = g.clock_event_reasons;
    p.ecc_corr = g.ecc_corrected_volatile;
    p.ecc_uncorr = g.ecc_uncorrected_volatile;
    p.xid_count = g.xid_count;
    p.last_xid = g.last_xid;
    // Counters become per-sample increments so a window sees exactly the events inside it.
    // XIDs count from the sampler's start, so the first sample's events are new; ECC counts
    // from the driver load, so only increases after our first sample are.
    if (g.xid_count) p.new_xids = *g.xid_count - std::min(*g.xid_count, r.prev_xid_count.value_or(0));
    if (g.ecc_corrected_volatile && r.prev_ecc_corr)
      p.new_ecc_corr = *g.ecc_corrected_volatile - std::min(*g.ecc_corrected_volatile, *r.prev_ecc_corr);
    if (g.xid_count) r.prev_xid_count = g.xid_count;
    if (g.ecc_corrected_volatile) r.prev_ecc_corr = g.ecc_corrected_volatile;
    p.sm_active = g.gpm.sm_active;
    p.tensor_active = g.gpm.tensor_active;
    p.dram_active = g.gpm.dram_active;
    std::optional<double> fp;
    for (const auto& v : {g.gpm.fp16_active, g.gpm.fp32_active, g.gpm.fp64_active})
      if (v) fp = std::max(fp.value_or(0.0), *v);
    p.fp_active = fp;
    p.processes = g.processes.size();
    r.next = (r.next + 1) % r.points.size();
    r.size = std::min(r.size + 1, r.points.size());
  }
}

namespace {

// Mean, max and count of a field over the window, skipping samples where it is n/a.
struct Stat {
  double sum = 0, max = -INFINITY, min = INFINITY;
  size_t n = 0;
  void add(const std::optional<double>& v) {
    if (!v) return;
    sum += *v, max = std::max(max, *v), min = std::min(min, *v), ++n;
  }
  double mean() const { return n ? sum / double(n) : 0; }
};

}  // namespace

std::vector<Finding> Diagnoser::findings() const {
  std::vector<Finding> out;
  for (size_t i = 0; i < rings_.size(); ++i) diagnose_gpu(indices_[i], rings_[i], &out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.gpu < b.gpu;
  });
  return out;
}

void Diagnoser::diagnose_gpu(unsigned gpu, const Ring& ring, std::vector<Finding>* out) const {
  const DiagnosisConfig& c = config_;
  if (ring.size == 0) return;
  auto emit = [&](Rule r, Severity s, std::string title, std::string detail, std::string advice) {
    out->push_back({r, s, gpu, std::move(title), std::move(detail), std::move(advice)});
  };
  const Point& last = ring.at(ring.size - 1);
  if (last.lost) {
    emit(Rule::kGpuLost, Severity::kCritical, "GPU not responding",
         "NVML lost the device (it fell off the bus or the driver reset it)",
         "Check `dmesg` for XID 79; drain the node, reset the GPU (nvidia-smi -r) or reboot; reseat or RMA if it recurs");
    return;
  }

  // Errors first: they make every performance reading meaningless.
  uint64_t new_xids = 0, new_ecc_corr = 0;
  for (size_t i = 0; i < ring.size; ++i) {
    new_xids += ring.at(i).new_xids;
    new_ecc_corr += ring.at(i).new_ecc_corr;
  }
  if (new_xids > 0) {
    std::string what = last.last_xid ? xid_text(*last.last_xid) : std::string("code unknown");
    emit(Rule::kXidErrors, Severity::kCritical, "XID errors reported by the driver",
         fmt::format("{} XID event(s) in the window, last {}", new_xids, what),
         "Read `dmesg | grep -i xid`; 13/31/43 point at the application (bad memory access), 48/63/64/92/94/95 at "
         "memory (drain, reset, RMA if recurring), 79 at the bus or power");
  }
  if (last.ecc_uncorr && *last.ecc_uncorr > 0) {
    emit(Rule::kEccErrors, Severity::kCritical, "uncorrectable ECC errors",
         fmt::format("{} uncorrectable (volatile) ECC error(s) since the last driver load", *last.ecc_uncorr),
         "Results on this GPU may be corrupt: drain it, reset it (row remapping applies on reset); RMA if it recurs");
  } else if (new_ecc_corr > 0) {
    emit(Rule::kEccErrors, Severity::kWarning, "correctable ECC errors increasing",
         fmt::format("{} new correctable ECC error(s) in the window ({} since driver load)", new_ecc_corr,
                     last.ecc_corr.value_or(0)),
         "Watch the rate; a steady climb predicts page retirement or row remapping: plan a reset or RMA");
  }

  Stat util, mem_frac, mem_util, temp, power, pcie, sm_active, tensor, dram, fp;
  size_t idle = 0, busy = 0, thermal = 0, powercap = 0, brake = 0, with_reasons = 0, with_procs = 0;
  for (size_t i = 0; i < ring.size; ++i) {
    const Point& p = ring.at(i);
    util.add(p.util);
    mem_frac.add(p.mem_fraction);
    mem_util.add(p.mem_util);
    temp.add(p.temp);
    power.add(p.power);
    pcie.add(p.pcie_bytes_per_s);
    sm_active.add(p.sm_active);
    tensor.add(p.tensor_active);
    dram.add(p.dram_active);
    fp.add(p.fp_active);
    if (p.util && *p.util <= c.idle_sample_pct) ++idle;
    if (p.util && *p.util >= c.busy_sample_pct) ++busy;
    if (p.processes) ++with_procs;
    if (p.reasons) {
      ++with_reasons;
      if (*p.reasons & (kClockEventSwThermal | kClockEventHwThermal)) ++thermal;
      if (*p.reasons & kClockEventSwPowerCap) ++powercap;
      if (*p.reasons & (kClockEventHwPowerBrake | kClockEventHwSlowdown)) ++brake;
    }
  }

  if (mem_frac.n && mem_frac.max > c.memory_pressure) {
    bool crit = mem_frac.max > c.memory_critical;
    emit(Rule::kMemoryPressure, crit ? Severity::kCritical : Severity::kWarning, "GPU memory pressure",
         fmt::format("memory {:.0f}% used (peak in window; threshold {:.0f}%)", mem_frac.max * 100,
                     c.memory_pressure * 100),
         "Out-of-memory is near: reduce the batch size, use FP16/BF16 or INT8 weights, enable gradient checkpointing "
         "(training) or gradient accumulation; check for leaks (memory that only grows)");
  }

  if (with_reasons) {
    double thermal_share = double(thermal) / double(with_reasons);
    double power_share = double(powercap) / double(with_reasons);
    double brake_share = double(brake) / double(with_reasons);
    if (thermal_share >= c.throttle_share) {
      emit(Rule::kThermalThrottling, Severity::kWarning, "thermal throttling",
           fmt::format("clocks reduced for temperature in {:.0f}% of samples{}", thermal_share * 100,
                       temp.n ? fmt::format(", GPU at {:.0f} C (max {:.0f} C)", temp.mean(), temp.max) : ""),
           "Improve cooling: check airflow, fans and inlet temperature, blanking panels, dust; spread load across "
           "GPUs; the work runs slower until the temperature drops");
    }
    if (power_share >= c.throttle_share || brake_share >= c.throttle_share) {
      bool hw = brake_share >= c.throttle_share;
      std::string watts;
      if (power.n && last.power_limit)
        watts = fmt::format(", drawing {:.0f} W of a {:.0f} W limit", power.mean(), *last.power_limit);
      emit(Rule::kPowerThrottling, hw ? Severity::kCritical : Severity::kWarning,
           hw ? "hardware power brake / slowdown" : "power-capped",
           fmt::format("clocks reduced for power in {:.0f}% of samples{}",
                       std::max(power_share, brake_share) * 100, watts),
           hw ? "An external signal slows the GPU (power supply or board protection): check PSU redundancy, "
                "cabling and the BMC event log"
              : "The GPU is power-bound: check the limit is the default (nvidia-smi -q -d POWER); lower precision "
                "(FP16/BF16/INT8) does more work per watt");
    }
  }

  // Bandwidth to the host with the SMs mostly idle: transfers, not kernels, set the pace.
  std::optional<double> sm_frac;
  if (sm_active.n) sm_frac = sm_active.mean();
  else if (util.n) sm_frac = util.mean() / 100.0;
  if (pcie.n && pcie.mean() >= c.pcie_busy_bytes_per_s && sm_frac && *sm_frac < c.pcie_low_sm_active) {
    emit(Rule::kPcieBound, Severity::kWarning, "PCIe-bound",
         fmt::format("PCIe TX+RX {:.1f} GB/s while SM activity is {:.0f}%", pcie.mean() / 1e9, *sm_frac * 100),
         "Host-device copies dominate: keep data on the GPU between steps, use pinned memory and async copies on "
         "separate streams to overlap with compute, move more work per transfer (larger batches), avoid per-step "
         "device-to-host syncs");
  }

  // Utilisation rules need a few samples so one slow second does not raise them.
  bool active = with_procs > 0 || (util.n && util.max > c.idle_sample_pct);
  if (util.n >= c.min_samples && active && util.mean() < c.low_util_pct) {
    double idle_share = double(idle) / double(util.n);
    if (idle_share >= c.idle_gap_share && busy > 0) {
      emit(Rule::kIdleGaps, Severity::kWarning, "low GPU utilization with idle gaps",
           fmt::format("mean utilization {:.0f}%, idle in {:.0f}% of samples, busy (>= {:.0f}%) in {}",
                       util.mean(), idle_share * 100, c.busy_sample_pct, busy),
           "The GPU waits for work between bursts: the input pipeline or CPU preprocessing is too slow (more "
           "loader workers, pinned memory, prefetch), or the host synchronises every step; overlap data loading "
           "with compute");
    } else {
      emit(Rule::kLowUtilization, Severity::kWarning, "low GPU utilization",
           fmt::format("mean utilization {:.0f}% (threshold {:.0f}%) over {} samples", util.mean(), c.low_util_pct,
                       util.n),
           "Kernels are too small or launched one by one: increase the batch size, use dynamic batching, CUDA "
           "graphs or fused kernels to cut launch overhead; check the process is not CPU-bound");
    }
  }

  // GPM tells what the busy SMs wait on: DRAM bandwidth or math pipes.
  bool gpu_busy = (sm_active.n && sm_active.mean() >= 0.3) || (util.n && util.mean() >= c.low_util_pct);
  std::optional<double> compute;
  if (tensor.n || fp.n) compute = std::max(tensor.n ? tensor.mean() : 0.0, fp.n ? fp.mean() : 0.0);
  if (gpu_busy && dram.n && compute) {
    if (dram.mean() >= c.dram_bound_active && dram.mean() > 2 * *compute) {
      emit(Rule::kMemoryBound, Severity::kInfo, "memory-bandwidth-bound",
           fmt::format("DRAM active {:.0f}%, tensor/FP pipes {:.0f}%", dram.mean() * 100, *compute * 100),
           "Kernels wait on DRAM: fuse element-wise ops, use FP16/BF16/INT8 to move fewer bytes, raise the batch "
           "size for more reuse per byte");
    } else if (*compute >= c.compute_bound_active) {
      bool on_tensor = tensor.n && tensor.mean() >= c.compute_bound_active;
      emit(Rule::kComputeBound, Severity::kInfo, on_tensor ? "compute-bound on tensor cores" : "compute-bound on FP pipes",
           fmt::format("tensor {} , FP pipes {}, DRAM {:.0f}%",
                       tensor.n ? fmt::format("{:.0f}%", tensor.mean() * 100) : "n/a",
                       fp.n ? fmt::format("{:.0f}%", fp.mean() * 100) : "n/a", dram.mean() * 100),
           on_tensor ? "The math units are the limit — a good place to be; lower precision (FP8/INT8) or more GPUs "
                       "go further"
                     : "FP32/FP64 pipes are busy but tensor cores idle: enable TF32, FP16 or BF16 so matmuls and "
                       "convolutions use tensor cores");
    }
  }

  if (util.n >= c.min_samples && util.mean() >= c.headroom_util_pct && mem_frac.n &&
      mem_frac.max < c.headroom_memory) {
    emit(Rule::kMemoryHeadroom, Severity::kInfo, "busy GPU with memory to spare",
         fmt::format("utilization {:.0f}%, memory at most {:.0f}% used", util.mean(), mem_frac.max * 100),
         "A larger batch (or more model instances) may raise throughput: sweep the batch size and keep the fastest");
  }
}

}  // namespace gpuopt::gpu
