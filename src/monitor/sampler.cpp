#include "monitor/sampler.h"

#include "core/log.h"
#include "monitor/sampler_impl.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace gpuopt::gpu {

using namespace nvml;  // NOLINT: the ABI's names

namespace {

// A group is judged against the budget by the median of its last kRecentReads reads, so one
// read stalled by the scheduler (or a costlier first read: GPM, process utilisation from
// timestamp 0) does not move a cheap group.
constexpr size_t kRecentReads = Sampler::Impl::kRecentReads;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

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
  im.slow_every = options.slow_interval_s > options.interval_s
                      ? uint64_t(std::llround(options.slow_interval_s / options.interval_s))
                      : 1;
  for (size_t k = 0; k < kQueryGroupCount; ++k) im.stats[k].slow = im.slow_every > 1 && query_group_info(k).slow_by_default;
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
    im.devs[i].prev_procs.reserve(kMaxProcessesPerGpu);
  }
  s->snap_.slow_every = im.slow_every;
  return s;
}

Sampler::~Sampler() { stop(); }

uint64_t Sampler::slow_every() const { return impl_->slow_every; }

const Snapshot& Sampler::sample() {
  const Api& api = nvml_->api();
  Impl& im = *impl_;
  auto t0 = std::chrono::steady_clock::now();
  double interval = im.have_last_tick ? std::chrono::duration<double>(t0 - im.last_tick).count() : 0.0;
  im.last_tick = t0;
  im.have_last_tick = true;
  snap_.timestamp_us = now_us();
  snap_.interval_s = interval;
  const uint64_t seq = ++snap_.sequence;

  // Runs one group's read with a steady clock and the thread's CPU clock around it; a fast group
  // whose mean cost passes the budget moves to the slow cadence (the exporter logs it).
  auto timed = [&](QueryGroup q, auto&& read) {
    auto w0 = std::chrono::steady_clock::now();
    double c0 = thread_cpu_s();
    bool called = read();
    if (!called) return false;
    QueryStat& st = im.stats[size_t(q)];
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    auto& recent = im.recent[size_t(q)];
    recent[st.calls % kRecentReads] = wall;
    ++st.calls;
    st.wall_s += wall;
    st.cpu_s += thread_cpu_s() - c0;
    // GPM (SM, tensor, DRAM activity) is what the bottleneck diagnosis reads every sample: it
    // stays on the fast cadence whatever it costs (2 ms per read on the H200, 0.2% of a core).
    if (!st.slow && q != QueryGroup::kGpm && im.slow_every > 1 && options_.slow_budget_s > 0 &&
        st.calls >= kRecentReads) {
      auto sorted = recent;
      std::nth_element(sorted.begin(), sorted.begin() + kRecentReads / 2, sorted.end());
      if (sorted[kRecentReads / 2] > options_.slow_budget_s) {
        st.slow = st.moved = true;
        st.moved_median_s = sorted[kRecentReads / 2];
      }
    }
    return true;
  };
  auto is_due = [&](size_t k, uint64_t last_read) {
    return last_read == 0 || !im.stats[k].slow || seq - last_read >= im.slow_every;
  };

  // XID events queued since the last poll (timeout 0: never blocks). The event set keeps them
  // between polls, so a slow cadence delays them but loses none.
  constexpr size_t kXid = size_t(QueryGroup::kXidEvents);
  if (im.events && (im.devs.empty() || is_due(kXid, im.devs[0].last_read_seq[kXid]))) {
    timed(QueryGroup::kXidEvents, [&] {
      for (int guard = 0; guard < 256; ++guard) {
        auto e = im.events->wait(0);
        if (!e.ok() || !*e) break;
        for (auto& dev : im.devs)
          if (dev.handle == (*e)->device && ((*e)->type & kEventXidCriticalError)) ++dev.xid_count, dev.last_xid = (*e)->data;
      }
      return true;
    });
    for (size_t i = 0; i < im.devs.size(); ++i) {
      im.devs[i].last_read_seq[kXid] = seq;
      snap_.gpus[i].read_us[kXid] = snap_.timestamp_us;
    }
  }

  for (size_t i = 0; i < im.devs.size(); ++i) {
    Impl::Dev& dev = im.devs[i];
    GpuSample& g = snap_.gpus[i];
    for (double& e : dev.elapsed_s) e += interval;
    // A lost device: every field n/a; the accumulated clock-event seconds and buffers stay.
    auto mark_lost = [&] {
      auto seconds = g.clock_event_seconds;
      auto procs = std::move(g.processes);
      procs.clear();
      g = GpuSample{};
      g.info = &devices_[i];
      g.clock_event_seconds = seconds;
      g.processes = std::move(procs);
      g.lost = true;
    };
    if (dev.lost) {
      mark_lost();
      continue;
    }
    g.lost = false;
    if (im.events) g.xid_count = dev.xid_count;
    g.last_xid = dev.last_xid;
    for (size_t k = kXid + 1; k < kQueryGroupCount; ++k) {
      const auto q = QueryGroup(k);
      bool due = is_due(k, dev.last_read_seq[k]);
      // A pid listed for the first time gets its /proc details now, whatever the cadence.
      if (!due && q == QueryGroup::kProcFiles)
        due = std::any_of(g.processes.begin(), g.processes.end(), [](const ProcessSample& p) { return !p.proc_read; });
      if (!due) continue;
      QueryCtx ctx{api, im, dev, g, dev.elapsed_s[k], snap_.timestamp_us, options_.processes};
      if (timed(q, [&] { return read_query_group(q, ctx); })) g.read_us[k] = snap_.timestamp_us;
      dev.last_read_seq[k] = seq;
      dev.elapsed_s[k] = 0;
      if (q == QueryGroup::kUtilization && dev.lost) {
        mark_lost();
        break;
      }
    }
  }
  snap_.sample_duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  im.sample_seconds_total += snap_.sample_duration_s;
  snap_.sample_seconds_total = im.sample_seconds_total;
  snap_.queries = im.stats;
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
  // Named, so the self-bench's per-thread CPU table tells it from the HTTP and driver threads.
  pthread_setname_np(thread_.native_handle(), "gpuopt-sampler");
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
