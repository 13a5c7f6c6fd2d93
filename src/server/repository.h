// Model repository in Triton's layout (<repo>/<model>/config.pbtxt, <repo>/<model>/<version>/
// model.onnx) or a single model file, and the loaded models: config, instances, batcher, stats.
//
//   Repository repo({.path = "models", .loader = session_model_loader()});
//   GPUOPT_RETURN_IF_ERROR(repo.load("simple"));            // reads, warms up, starts the batcher
//   auto v = repo.find("simple", "");                        // latest ready version
//   v.value()->batcher->submit(...);
#pragma once

#include "server/batcher.h"
#include "server/model_config.h"
#include "server/model_instance.h"
#include "server/stats.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuopt::server {

// Operator files are read only when they are regular files of at most this size (a FIFO, a device
// or an oversized file is refused with a message naming it, before any byte is read).
constexpr size_t kMaxConfigBytes = size_t{4} << 20;        // config.pbtxt
constexpr size_t kMaxWarmupFileBytes = size_t{1} << 30;    // a model_warmup input_data_file

struct LoadedVersion {
  std::string name;
  int64_t version = 1;
  std::string version_str = "1";
  std::string path;
  ModelConfig config;  // completed against the model
  std::vector<IoSpec> model_inputs, model_outputs;
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
  std::unique_ptr<Batcher> batcher;
  double start_s = 0;          // load -> ready: the model read, instances made, warm-up run
  PlanCacheStatus plan_cache;  // what the first GPU instance's start found in the plan cache
  std::string precisions;      // each precision its instances run at, once ("fp16", "fp16/fp32")
};

struct RepositoryOptions {
  std::string path;  // a repository directory, or one .onnx file
  // Further repository directories (tritonserver's --model-repository given again): the models
  // of all are served; a name in two of them is an error (duplicates()).
  std::vector<std::string> extra_paths;
  bool strict_config = false;  // --strict-model-config=true: a model needs a config.pbtxt naming its inputs and outputs
  ModelLoader loader;
  int64_t default_max_batch_size = 4;
  int cuda_devices = 0;            // GPUs usable for KIND_GPU / KIND_AUTO instances
  std::string precision = "fp32";  // default for models without gpuopt.precision
  bool cuda_graphs = true;         // default for models without optimization { cuda { graphs } }
  std::string cache_dir;           // plan cache of GPU instances (SessionOptions::cache_dir); "" = none
  // serve's --kernel over the environment (SessionOptions::kernels); unset: the environment at each
  // load. A model's gpuopt.kernel.NAME parameters apply over these.
  std::optional<KernelSettings> kernels;
};

class Repository {
 public:
  explicit Repository(RepositoryOptions options);
  ~Repository();

  // Model names present on disk (directories with a config or a version folder; the file stem
  // for a single model file).
  std::vector<std::string> scan() const;
  // A model name found in two repository directories, as an error naming both; Ok when none.
  Status duplicates() const;
  // The directory of a model ("" when no repository holds it; the file's folder for a single file).
  std::string model_dir(const std::string& name) const;
  // Loads (or reloads) a model: every version its policy selects. Blocking; call it off the
  // request threads. Errors name the model and reason; the model is left UNAVAILABLE, or, when
  // a version was serving (a failed reload), READY with the versions it had.
  Status load(const std::string& name);
  Status unload(const std::string& name);
  // A ready version ("" = latest). NotFound for unknown models/versions, Unavailable if loading.
  Result<std::shared_ptr<LoadedVersion>> find(const std::string& name, const std::string& version) const;
  std::vector<std::shared_ptr<LoadedVersion>> ready_versions() const;
  // /v2/repository/index entries.
  nlohmann::json index(bool ready_only) const;
  bool all_ready() const;  // every model asked for is READY
  // Stops every batcher after it finished what it holds.
  void stop_all();

 private:
  struct Entry {
    std::string state = "UNAVAILABLE";  // READY, LOADING, UNLOADING, UNAVAILABLE
    std::string reason;
    std::map<int64_t, std::shared_ptr<LoadedVersion>> versions;
  };
  Result<std::map<int64_t, std::shared_ptr<LoadedVersion>>> load_versions(const std::string& name);
  Status warm_up(LoadedVersion& v, std::vector<std::unique_ptr<ModelInstance>>& instances);
  Status warm_up_largest_batch(LoadedVersion& v, std::vector<std::unique_ptr<ModelInstance>>& instances,
                               const std::vector<bool>& gpu_instance);
  void set_state(const std::string& name, const std::string& state, const std::string& reason);

  RepositoryOptions opt_;
  // Helpers for the batchers' answers (answer_pool.h), one pool for every model.
  std::shared_ptr<AnswerPool> answers_ = std::make_shared<AnswerPool>(AnswerPool::default_threads());
  bool single_file_ = false;
  mutable std::shared_mutex mu_;
  std::map<std::string, Entry> models_;
  std::mutex load_mu_;  // one load/unload at a time
};

// --model-control-mode poll: every `period` re-scans the repository directories, loads new
// models, unloads removed ones and reloads a model whose files changed (a failed reload keeps the
// old versions serving). Runs on its own thread until stop() or destruction.
// The files under `dir` (recursive) with their sizes and modification times, one per line: a
// poll compares it to notice added, removed or replaced files.
std::string files_fingerprint(const std::filesystem::path& dir);

class RepositoryPoller {
 public:
  // `also` runs after each re-scan on the poller's thread (the generation models' own poll).
  RepositoryPoller(Repository& repo, std::chrono::milliseconds period, std::function<void()> also = {});
  ~RepositoryPoller();
  void stop();
  void poll_once();  // one re-scan (the thread calls it each period)

 private:
  std::string fingerprint(const std::string& name) const;

  Repository& repo_;
  std::chrono::milliseconds period_;
  std::function<void()> also_;
  std::map<std::string, std::string> known_;  // model -> its files' names, sizes and times
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpuopt::server
