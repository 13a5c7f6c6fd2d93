// Loading generation models (runner, tokenizer, chat template, engine) and their metrics.
#include "server/openai/llm_models.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/device.h"
#include "core/log.h"
#include "llm/config.h"
#include "llm/runner.h"
#include "monitor/prom_text.h"
#include "server/model_instance.h"

namespace gpuopt::server::openai {

namespace fs = std::filesystem;

bool is_llm_model_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec) || !fs::is_regular_file(dir / "tokenizer.json", ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json") return true;
  return false;
}

// A few threads and a queue: requests are prepared in arrival order, each on one thread.
struct LlmModels::PrepPool {
  explicit PrepPool(int n) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this] {
        for (;;) {
          std::function<void()> task;
          {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return exit || !tasks.empty(); });
            if (tasks.empty()) return;  // exit, and everything queued ran
            task = std::move(tasks.front());
            tasks.pop_front();
          }
          task();
        }
      });
  }
  bool post(std::function<void()>& task) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (exit) return false;
      tasks.push_back(std::move(task));
    }
    cv.notify_one();
    return true;
  }
  void join() {
    {
      std::lock_guard<std::mutex> lk(mu);
      exit = true;
    }
    cv.notify_all();
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
  ~PrepPool() { join(); }

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool exit = false;
  std::vector<std::thread> threads;
};

LlmModels::LlmModels(LlmServeOptions options)
    : opt_(std::move(options)),
      prep_(std::make_unique<PrepPool>(std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 2, 8))) {}

LlmModels::~LlmModels() { stop(std::chrono::milliseconds(0)); }

void LlmModels::post(std::function<void()> task) {
  if (!prep_->post(task)) task();
}

namespace {

Result<std::string> read_small(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec || size > (size_t{16} << 20)) return Status::InvalidArgument("'{}' is missing or over 16 MiB", p.string());
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Status LlmModels::load(const std::string& name, const fs::path& dir) {
  auto m = std::make_shared<LlmModel>();
  m->name = name;
  m->path = dir.string();
  auto st = [&]() -> Status {
    GPUOPT_ASSIGN_OR_RETURN(m->config, llm::load_llm_config(dir));
    GPUOPT_ASSIGN_OR_RETURN(auto tok, llm::Tokenizer::from_file(dir / "tokenizer.json"));
    m->tokenizer = std::shared_ptr<const llm::Tokenizer>(std::move(tok));
    if (fs::exists(dir / "tokenizer_config.json")) {
      GPUOPT_ASSIGN_OR_RETURN(std::string text, read_small(dir / "tokenizer_config.json"));
      auto t = ChatTemplate::from_tokenizer_config(text, name + "/tokenizer_config.json");
      if (t.ok()) m->chat = *t;
      else if (t.status().code() != StatusCode::kNotFound) return t.status();
    }
    Device dev = Device::cpu();
    if (opt_.device == "auto") {
      if (cuda_device_count() > 0) dev = Device::cuda(0);
    } else {
      GPUOPT_ASSIGN_OR_RETURN(dev, parse_device(opt_.device));
    }
    m->device = dev.to_string();
    llm::RunnerOptions ro;
    if (opt_.dtype == "fp16") ro.compute_dtype = DType::F16;
    else if (opt_.dtype == "bf16") ro.compute_dtype = DType::BF16;
    else if (opt_.dtype == "fp32") ro.compute_dtype = DType::F32;
    else ro.compute_dtype = dev.is_cuda() ? m->config.dtype : DType::F32;
    if (!dev.is_cuda() && ro.compute_dtype != DType::F32)
      return Status::InvalidArgument("--dtype {} needs a CUDA device: the CPU runner computes in fp32", opt_.dtype);
    ro.num_kv_blocks = opt_.num_kv_blocks;
    ro.gpu_memory_utilization = opt_.gpu_memory_utilization;
    ro.max_batch = opt_.engine.max_num_seqs;
    ro.max_step_tokens = std::max(opt_.engine.max_num_batched_tokens, opt_.engine.max_num_seqs);
    ro.device_index = dev.index;
    ro.quant_kernels = opt_.quant_kernels;
    GPUOPT_ASSIGN_OR_RETURN(ro.kv_cache_dtype, llm::parse_kv_cache_dtype(opt_.kv_cache_dtype));
    m->max_model_len = opt_.max_model_len > 0 ? std::min(opt_.max_model_len, m->config.max_position)
                                              : m->config.max_position;
    if (opt_.random_weights) {
      m->checkpoint = llm::random_checkpoint(m->config, m->config.dtype, 0);
    } else {
      GPUOPT_ASSIGN_OR_RETURN(m->checkpoint, llm::open_checkpoint(dir, m->config));
    }
    std::unique_ptr<llm::ModelRunner> runner;
    if (dev.is_cuda()) {
      GPUOPT_ASSIGN_OR_RETURN(runner, llm::make_cuda_runner(m->config, *m->checkpoint, ro));
    } else {
      GPUOPT_ASSIGN_OR_RETURN(runner, llm::make_cpu_runner(m->config, *m->checkpoint, ro));
    }
    GPUOPT_ASSIGN_OR_RETURN(m->engine, llm::LlmEngine::start(std::move(runner), m->tokenizer, opt_.engine));
    return Status::Ok();
  }();
  std::lock_guard<std::mutex> lk(mu_);
  if (!st.ok()) {
    failed_[name] = st.message();
    return st.with_context(fmt::format("model '{}'", name));
  }
  m->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  failed_.erase(name);
  models_[name] = std::move(m);
  return Status::Ok();
}

std::shared_ptr<LlmModel> LlmModels::find(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<LlmModel>> LlmModels::all() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<LlmModel>> v;
  for (auto& [n, m] : models_) v.push_back(m);
  return v;
}

std::vector<std::string> LlmModels::failed() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> v;
  for (auto& [n, r] : failed_) v.push_back(n);
  return v;
}

nlohmann::json LlmModels::index() const {
  std::lock_guard<std::mutex> lk(mu_);
  nlohmann::json a = nlohmann::json::array();
  for (auto& [n, m] : models_) a.push_back({{"name", n}, {"version", "1"}, {"state", "READY"}, {"reason", ""}});
  for (auto& [n, r] : failed_) a.push_back({{"name", n}, {"state", "UNAVAILABLE"}, {"reason", r}});
  return a;
}

Status LlmModels::unload(const std::string& name, std::chrono::milliseconds drain) {
  std::shared_ptr<LlmModel> m;
  {
    std::lock_guard<std::mutex> lk(mu_);
    bool was_failed = failed_.erase(name) > 0;
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (was_failed) return Status::Ok();
      return Status::NotFound("generation model '{}' is not loaded", name);
    }
    m = std::move(it->second);
    models_.erase(it);
  }
  if (m->engine) m->engine->stop(drain);
  return Status::Ok();
}

void LlmModels::stop(std::chrono::milliseconds drain) {
  prep_->join();  // requests being prepared submit (or are refused) before the engines stop
  for (auto& m : all())
    if (m->engine) m->engine->stop(drain);
}

namespace {

void histogram(std::string& out, const char* name, const char* help, const std::string& label,
               const llm::Histogram& h, bool header) {
  if (header) out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
    cum += h.counts[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, label, h.bounds[i], cum);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, label, h.count);
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, label, h.sum, name, label, h.count);
}

}  // namespace

std::string LlmModels::metrics_text() const {
  auto models = all();
  if (models.empty()) return "";
  std::vector<std::pair<std::string, llm::EngineStats>> stats;
  for (auto& m : models) {
    std::string label;  // escaped: a --llm-model NAME may hold quotes or backslashes
    gpu::prom_label(&label, "model_name", m->name);
    stats.emplace_back(std::move(label), m->engine->stats());
  }
  std::string out;
  auto gauge_or_counter = [&](const char* name, const char* type, const char* help, auto get) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (auto& [label, s] : stats) out += fmt::format("{}{{{}}} {}\n", name, label, get(s));
  };
  using S = llm::EngineStats;
  gauge_or_counter("gpuopt:num_requests_running", "gauge", "Requests in the running batch",
                   [](const S& s) { return s.num_running; });
  gauge_or_counter("gpuopt:num_requests_waiting", "gauge", "Requests waiting to be scheduled",
                   [](const S& s) { return s.num_waiting; });
  gauge_or_counter("gpuopt:kv_cache_usage_perc", "gauge", "KV-cache usage, 0 to 1 (1 = full)",
                   [](const S& s) { return s.kv_cache_usage; });
  gauge_or_counter("gpuopt:kv_cache_blocks", "gauge", "KV-cache blocks (their element type: --kv-cache-dtype)",
                   [](const S& s) { return s.kv_cache_blocks; });
  gauge_or_counter("gpuopt:num_preemptions_total", "counter", "Sequences preempted (recomputed later)",
                   [](const S& s) { return s.num_preemptions_total; });
  gauge_or_counter("gpuopt:prompt_tokens_total", "counter", "Prompt tokens processed",
                   [](const S& s) { return s.prompt_tokens_total; });
  gauge_or_counter("gpuopt:generation_tokens_total", "counter", "Tokens generated",
                   [](const S& s) { return s.generation_tokens_total; });
  gauge_or_counter("gpuopt:requests_finished_total", "counter", "Requests finished, for any reason",
                   [](const S& s) { return s.requests_finished_total; });
  gauge_or_counter("gpuopt:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache",
                   [](const S& s) { return s.prefix_cache_queries; });
  gauge_or_counter("gpuopt:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache",
                   [](const S& s) { return s.prefix_cache_hits; });
  // The engine thread's time: all of it per step, and the part inside the model runner; the rest
  // is the server's own (scheduling, detokenizing, answering).
  gauge_or_counter("gpuopt:engine_steps_total", "counter", "Engine steps run", [](const S& s) { return s.steps_total; });
  gauge_or_counter("gpuopt:engine_step_seconds_total", "counter", "Engine thread time spent on steps",
                   [](const S& s) { return s.step_seconds_total; });
  gauge_or_counter("gpuopt:engine_runner_seconds_total", "counter", "Of that, time inside the model runner",
                   [](const S& s) { return s.runner_seconds_total; });
  struct H {
    const char* name;
    const char* help;
    const llm::Histogram S::*h;
  };
  const H hs[] = {
      {"gpuopt:time_to_first_token_seconds", "Time to the first generated token", &S::time_to_first_token_s},
      {"gpuopt:inter_token_latency_seconds", "Time between generated tokens", &S::inter_token_latency_s},
      {"gpuopt:e2e_request_latency_seconds", "Request latency, submit to the last token", &S::e2e_request_latency_s},
      {"gpuopt:request_queue_time_seconds", "Time a request waited before its first step", &S::queue_time_s},
  };
  for (const H& h : hs) {
    bool first = true;
    for (auto& [label, s] : stats) {
      histogram(out, h.name, h.help, label, s.*(h.h), first);
      first = false;
    }
  }
  return out;
}

}  // namespace gpuopt::server::openai
