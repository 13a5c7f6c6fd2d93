// GpuUtil: NVML utilisation sampled on a thread while a point is measured.
#include "monitor/nvml.h"
#include "tune/search.h"

#include <mutex>

namespace gpuopt::tune {

struct GpuUtil::Impl {
  std::shared_ptr<nvml::Nvml> nv;
  nvml::Device dev{};
  std::thread thread;
  std::atomic<bool> running{false};
  double sum = 0;
  int samples = 0;
};

std::unique_ptr<GpuUtil> GpuUtil::open() {
  auto nv = nvml::Nvml::load();
  if (!nv.ok()) return nullptr;
  auto count = (*nv)->device_count();
  if (!count.ok() || *count == 0) return nullptr;
  auto dev = (*nv)->device(0);
  if (!dev.ok() || !(*nv)->utilization(*dev).ok()) return nullptr;
  std::unique_ptr<GpuUtil> u(new GpuUtil());
  u->impl_ = std::make_unique<Impl>();
  u->impl_->nv = *nv;
  u->impl_->dev = *dev;
  return u;
}

GpuUtil::~GpuUtil() {
  if (impl_ && impl_->running) stop();
}

void GpuUtil::start() {
  Impl& m = *impl_;
  m.sum = 0;
  m.samples = 0;
  m.running = true;
  m.thread = std::thread([&m] {
    while (m.running) {
      if (auto u = m.nv->utilization(m.dev); u.ok()) {
        m.sum += u->gpu;
        ++m.samples;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

double GpuUtil::stop() {
  Impl& m = *impl_;
  m.running = false;
  if (m.thread.joinable()) m.thread.join();
  return m.samples ? m.sum / m.samples : -1;
}

}  // namespace gpuopt::tune
