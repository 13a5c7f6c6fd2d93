// run_tune: the offline search per precision, then (online mode) served configurations driven
// by `gpuopt perf`; the choice at the end (choose.cpp).
#include "tune/search.h"

#include "net/http.h"
#include "tune/process.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpuopt::tune {

namespace fs = std::filesystem;

bool Searcher::out_of_time() {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.time_budget_s > 0 && el >= options.time_budget_s) {
    result.time_budget_hit = true;
    return true;
  }
  return false;
}

void Searcher::begin(const std::string& what) {
  if (!progress) return;
  Progress p;
  p.done = static_cast<int>(result.points.size());
  p.expected = std::max(expected, p.done + 1);
  p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  p.eta_s = p.done > 0 ? p.elapsed_s / p.done * (p.expected - p.done) : 0;
  if (options.time_budget_s > 0) p.eta_s = std::min(p.eta_s, std::max(0.0, options.time_budget_s - p.elapsed_s));
  p.what = what;
  progress(p);
}

void Searcher::add(Point p) { result.points.push_back(std::move(p)); }

namespace {

// Doublings up to max_batch, plus a few binary-search steps.
int expected_offline_points(const TuneOptions& o) {
  int n = 0;
  for (int64_t b = 1; b <= o.max_batch; b *= 2) ++n;
  return n + 3;
}

// A point of the online search: one serve configuration (precision, max batch, instances, delay).
Point online_point(const std::string& precision, int64_t mbs, int instances, int64_t delay_us) {
  Point p;
  p.mode = "online";
  p.precision = precision;
  p.batch = mbs;
  p.instances = instances;
  p.delay_us = delay_us;
  return p;
}

Status write_repo(const fs::path& repo, const TuneOptions& o, const std::string& precision, int64_t mbs, int instances,
                  int64_t delay_us) {
  std::error_code ec;
  const fs::path dir = repo / o.model_name / "1";
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create {}: {}", dir.string(), ec.message());
  fs::remove(dir / "model.onnx", ec);
  fs::create_symlink(fs::absolute(o.model), dir / "model.onnx", ec);
  if (ec) return Status::Internal("cannot link the model into {}: {}", dir.string(), ec.message());
  TuneResult one;
  one.options = o;
  Point p = online_point(precision, mbs, instances, delay_us);
  p.ok = true;
  one.points.push_back(p);
  one.chosen = 0;
  std::ofstream(repo / o.model_name / "config.pbtxt") << config_pbtxt(one);
  return Status::Ok();
}

// Waits for the server's "Started HTTPService at ADDR:PORT" line (it was started on port 0, so
// the kernel chose a free one) and then for /v2/health/ready.
Result<int> wait_ready(pid_t pid, const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  const std::string mark = "Started HTTPService at ";
  int port = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!is_running(pid)) {
      // Its last error line (one line: the command's own error may be this one).
      std::string last;
      std::istringstream lines(text);
      for (std::string l; std::getline(lines, l);)
        if (l.find("error") != std::string::npos || l.find("Error") != std::string::npos) last = l;
      if (last.empty()) last = text.substr(text.size() > 200 ? text.size() - 200 : 0);
      std::replace(last.begin(), last.end(), '\n', ' ');
      return Status::Internal("gpuopt serve exited before it was ready: {} (log: {})", last, log);
    }
    if (port == 0)
      if (size_t at = text.find(mark); at != std::string::npos) {
        const size_t colon = text.find(':', at + mark.size());
        if (colon != std::string::npos) port = std::atoi(text.c_str() + colon + 1);
      }
    if (port > 0) {
      net::HttpClient c("127.0.0.1", static_cast<uint16_t>(port), std::chrono::seconds(2));
      auto r = c.get("/v2/health/ready");
      if (r.ok() && r->status == 200) return port;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::DeadlineExceeded("gpuopt serve was not ready within 300 s (log: {})", log);
}

}  // namespace

void search_online(const TuneOptions& o, const std::string& precision, Searcher& sr) {
  // max_batch_size candidates: the offline batch with the most throughput within the
  // constraints, and the largest batch that fit (the edge), when it differs.
  int64_t best = 0;
  double best_tp = 0;
  for (const Point& p : sr.result.points)
    if (p.mode == "offline" && p.ok && p.precision == precision &&
        (o.latency_budget_ms <= 0 || p.p99_ms <= o.latency_budget_ms) && (o.memory_limit == 0 || p.memory_bytes <= static_cast<int64_t>(o.memory_limit)) &&
        p.throughput > best_tp) {
      best_tp = p.throughput;
      best = p.batch;
    }
  if (best == 0) {
    sr.result.notes.push_back(fmt::format("{}: no offline batch met the constraints: not served", precision));
    return;
  }
  std::vector<int64_t> sizes{best};
  if (auto it = sr.result.best_batch.find(precision); it != sr.result.best_batch.end() && it->second > best) {
    // The edge is too slow for the budget when it was already measured over it.
    bool slow = false;
    for (const Point& p : sr.result.points)
      if (p.mode == "offline" && p.ok && p.precision == precision && p.batch == it->second && o.latency_budget_ms > 0 &&
          p.p99_ms > o.latency_budget_ms)
        slow = true;
    if (!slow) sizes.push_back(it->second);
  }
  int levels = 0;
  for (int c = 1; c <= o.max_concurrency; c *= 2) ++levels;
  sr.expected += static_cast<int>(sizes.size() * o.instances.size() * o.delays_us.size()) * std::min(levels, 5);
  const std::string exe = o.gpuopt_exe.empty() ? self_exe() : o.gpuopt_exe;
  int k = 0;
  for (int64_t mbs : sizes)
    for (int inst : o.instances)
      for (int64_t delay : o.delays_us) {
        if (sr.out_of_time()) return;
        const fs::path repo = fs::path(o.work_dir) / fmt::format("online-{}-{}", precision, ++k);
        const std::string log = (fs::path(o.work_dir) / fmt::format("online-{}-{}.log", precision, k)).string();
        auto fail = [&](const std::string& why) {
          Point p = online_point(precision, mbs, inst, delay);
          p.error = why;
          sr.add(p);
        };
        if (Status st = write_repo(repo, o, precision, mbs, inst, delay); !st.ok()) {
          fail(st.message());
          continue;
        }
        sr.begin(fmt::format("online {} max_batch {} x{} delay {} us: starting serve", precision, mbs, inst, delay));
        // Every port ephemeral (perf speaks HTTP: no gRPC endpoint), so a busy machine's ports do not matter.
        std::vector<std::string> serve{exe, "serve", "--model-repository", repo.string(), "--http-address", "127.0.0.1",
                                       "--http-port", "0", "--metrics-port", "0", "--allow-grpc", "false",
                                       "--exit-timeout-secs", "5"};
        auto pid = spawn_logged(serve, log);
        if (!pid.ok()) {
          sr.fatal = fmt::format("{} (log file {})", pid.status().message(), log);
          return;
        }
        auto port = wait_ready(*pid, log);
        if (!port.ok()) {
          stop_process(*pid, 5);
          // A serve that stopped because of the model at this configuration (its config or
          // instances could not load) is a failed point; anything else (a port taken, a crash,
          // no answer) says nothing about the model and stops the search.
          const std::string why = port.status().message();
          if (why.find("model '" + o.model_name + "'") == std::string::npos &&
              why.find(o.model_name + "/config.pbtxt") == std::string::npos) {
            sr.fatal = why;
            return;
          }
          fail(why);
          continue;
        }
        double prev = 0;
        for (int c = 1; c <= o.max_concurrency; c *= 2) {
          if (sr.out_of_time()) break;
          sr.begin(fmt::format("online {} max_batch {} x{} delay {} us, concurrency {}", precision, mbs, inst, delay, c));
          Point p = online_point(precision, mbs, inst, delay);
          p.concurrency = c;
          for (const Point& q : sr.result.points)  // the session's memory at this batch, from the engine search
            if (q.mode == "offline" && q.ok && q.precision == precision && q.batch == mbs) p.memory_bytes = q.memory_bytes;
          const auto t0 = std::chrono::steady_clock::now();
          if (sr.util) sr.util->start();
          int rc = 0;
          auto out = run_captured({exe, "perf", "-m", o.model_name, "-u", fmt::format("127.0.0.1:{}", *port),
                                   "--concurrency-range", std::to_string(c), "-p", std::to_string(o.measurement_ms), "-r",
                                   "3", "-s", "25", "--json"},
                                  60.0 + 10.0 * o.measurement_ms / 1000.0, &rc, log);
          if (sr.util) p.gpu_util = sr.util->stop();
          p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          nlohmann::json j;
          if (out.ok() && rc == 0) j = nlohmann::json::parse(*out, nullptr, false);
          if (!is_running(*pid)) {  // the server died under the load: not a point's result
            sr.fatal = fmt::format("gpuopt serve exited during the measurement (log: {})", log);
            return;
          }
          if (!out.ok() || rc != 0 || j.is_discarded() || !j.contains("results") || j["results"].empty()) {
            p.error = out.ok() ? fmt::format("gpuopt perf failed (exit {}; see {})", rc, log) : out.status().message();
            sr.add(p);
            break;
          }
          const auto& lv = j["results"][0];
          p.throughput = lv.value("throughput_infer_per_s", 0.0);
          p.p50_ms = lv.value("p50_us", 0.0) / 1e3;
          p.p99_ms = lv.value("p99_us", 0.0) / 1e3;
          const uint64_t errors = lv.value("errors", uint64_t{0});
          p.ok = errors == 0 && p.throughput > 0;
          if (errors) p.error = fmt::format("{} failed requests", errors);
          const bool over = o.latency_budget_ms > 0 && p.p99_ms > o.latency_budget_ms;
          const double tp = p.throughput;
          sr.add(p);
          if (!p.ok || over || (prev > 0 && tp < prev * 1.05)) break;  // over budget, or saturated
          prev = tp;
        }
        stop_process(*pid, 10);
      }
}

Result<TuneResult> run_tune(const TuneOptions& o, const ProgressFn& progress) {
  TuneResult r;
  r.options = o;
  Searcher sr{o, r, progress};
  auto util = GpuUtil::open();
  sr.util = util.get();
  std::vector<std::string> precisions = o.precisions;
  if (precisions.empty()) {
    const bool gpu = o.device.rfind("cuda", 0) == 0;
    precisions = gpu ? std::vector<std::string>{"fp32", "fp16", "bf16"} : std::vector<std::string>{"fp32"};
    // On the GPU, a quantized model is searched at the precision it was quantized for too.
    if (gpu) {
      const ModelKinds k = model_kinds(o.model);
      if (k.qdq || k.quantized_ops) precisions.push_back("int8");
      if (k.fp8) precisions.push_back("fp8");
    }
  }
  sr.expected = static_cast<int>(precisions.size()) * expected_offline_points(o);
  for (const std::string& p : precisions) {
    if (std::string why = precision_unavailable(o, p); !why.empty()) {
      r.notes.push_back(fmt::format("{}: not searched: {}", p, why));
      continue;
    }
    if (sr.out_of_time()) break;
    search_offline(o, p, sr);
  }
  if (o.mode == "online")
    for (const std::string& p : precisions) {
      if (!precision_unavailable(o, p).empty() || sr.out_of_time()) continue;
      search_online(o, p, sr);
      if (!sr.fatal.empty()) return Status::Unavailable("tune --mode online stopped: {}", sr.fatal);
    }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sr.start).count();
  if (r.time_budget_hit) r.notes.push_back(fmt::format("--time-budget {:.0f} s reached: the search stopped early", o.time_budget_s));
  choose(&r);
  return r;
}

}  // namespace gpuopt::tune
