// RepositoryPoller: tritonserver's --model-control-mode poll over the repository directories.
#include "server/repository.h"

#include <filesystem>
#include <set>

#include "core/log.h"

namespace gpuopt::server {

namespace fs = std::filesystem;

RepositoryPoller::RepositoryPoller(Repository& repo, std::chrono::milliseconds period, std::function<void()> also)
    : repo_(repo), period_(period), also_(std::move(also)) {
  // What the start loaded (or failed to) is the baseline: only changes after it count.
  for (const auto& name : repo_.scan()) known_[name] = fingerprint(name);
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, period_, [this] { return stop_; })) {
      lk.unlock();
      poll_once();
      if (also_) also_();
      lk.lock();
    }
  });
}

RepositoryPoller::~RepositoryPoller() { stop(); }

void RepositoryPoller::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Every file under the model's directory with its size and modification time: a new version
// folder, a replaced model file or an edited config.pbtxt changes it.
std::string RepositoryPoller::fingerprint(const std::string& name) const {
  std::string dir = repo_.model_dir(name);
  return dir.empty() ? "" : files_fingerprint(dir);
}

std::string files_fingerprint(const std::filesystem::path& dir) {
  std::set<std::string> lines;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    std::string rel = fs::relative(it->path(), dir, e2).string();
    if (it->is_regular_file(e2)) {
      auto size = it->file_size(e2);
      auto t = it->last_write_time(e2).time_since_epoch().count();
      lines.insert(fmt::format("{} {} {}", rel, size, static_cast<int64_t>(t)));
    } else {
      lines.insert(rel + "/");
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

void RepositoryPoller::poll_once() {
  if (Status d = repo_.duplicates(); !d.ok()) {
    GPUOPT_LOG(error, "repository poll: {}; nothing changed", d.message());
    return;
  }
  std::vector<std::string> names = repo_.scan();
  std::set<std::string> present(names.begin(), names.end());
  for (auto it = known_.begin(); it != known_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    Status s = repo_.unload(it->first);
    GPUOPT_LOG(warn, "repository poll: model '{}' removed{}{}", it->first, s.ok() ? ", unloaded" : ": ",
               s.ok() ? "" : s.message());
    it = known_.erase(it);
  }
  for (const auto& name : names) {
    std::string fp = fingerprint(name);
    auto it = known_.find(name);
    if (it != known_.end() && it->second == fp) continue;
    const bool is_new = it == known_.end();
    known_[name] = fp;  // a failed load is retried when its files change again
    Status s = repo_.load(name);
    if (s.ok())
      GPUOPT_LOG(warn, "repository poll: model '{}' {}", name, is_new ? "loaded" : "reloaded");
    else
      GPUOPT_LOG(error, "repository poll: model '{}' failed to {}: {}", name, is_new ? "load" : "reload",
                 s.message());
  }
}

}  // namespace gpuopt::server
