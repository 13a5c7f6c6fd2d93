// The inference server's generation models: found in the repositories (or named with
// --llm-model), loaded at start, routed through the OpenAI API and Triton's generate extension.
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/log.h"
#include "net/http.h"
#include "server/inference_server.h"
#include "server/openai/llm_models.h"
#include "server/openai/routes.h"

namespace gpuopt::server {

namespace fs = std::filesystem;

namespace {

// A generation model's drain on unload (explicit or poll): running requests get this long to finish.
constexpr std::chrono::seconds kLlmUnloadDrain{30};

}  // namespace

std::map<std::string, fs::path> InferenceServer::llm_dirs() const {
  std::map<std::string, fs::path> found;
  std::error_code ec;
  std::vector<std::string> roots;
  if (fs::is_directory(opt_.repo.path, ec)) roots.push_back(opt_.repo.path);
  roots.insert(roots.end(), opt_.repo.extra_paths.begin(), opt_.repo.extra_paths.end());
  for (const auto& root : roots)
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory(ec) && !e.path().filename().string().starts_with(".") && openai::is_llm_model_dir(e.path()))
        found.emplace(e.path().filename().string(), e.path());
  return found;
}

Status InferenceServer::load_llm_models() {
  llm_ = std::make_unique<openai::LlmModels>(opt_.llm ? *opt_.llm : openai::LlmServeOptions{});
  std::vector<std::pair<std::string, fs::path>> found;
  auto dirs = llm_dirs();
  // Explicit mode loads only what --load-model names ('*': all); the others wait for the load API.
  if (opt_.control_mode == ControlMode::kExplicit) {
    std::set<std::string> wanted(opt_.load_models.begin(), opt_.load_models.end());
    for (const auto& [name, dir] : dirs)
      if (wanted.count("*") || wanted.count(name)) found.emplace_back(name, dir);
  } else {
    found.assign(dirs.begin(), dirs.end());
  }
  if (opt_.control_mode == ControlMode::kPoll)
    for (const auto& [name, dir] : dirs) llm_known_[name] = files_fingerprint(dir);
  for (const auto& [name, dir] : llm_->options().extra) found.emplace_back(name, dir);
  for (const auto& [name, dir] : found) {
    Status st = llm_->load(name, dir);
    if (st.ok()) {
      auto m = llm_->find(name);
      GPUOPT_LOG(info, "generation model '{}' READY on {} (context {}, chat template {})", name, m->device,
                 m->max_model_len, m->chat ? "yes" : "no");
      continue;
    }
    if (opt_.exit_on_error) return Status(st.code(), st.message() + " (--exit-on-error=false serves the other models)");
    GPUOPT_LOG(error, "{}", st.message());
  }
  return Status::Ok();
}

bool InferenceServer::control_llm(const std::string& name, bool load, std::function<void(Status)>& done) {
  auto dirs = llm_dirs();
  auto it = dirs.find(name);
  if (it == dirs.end() && !llm_->find(name)) return false;  // not a generation model: the repository's
  fs::path dir = it == dirs.end() ? fs::path() : it->second;
  post_task([this, name, dir, load, done = std::move(done)] {
    Status s;
    if (!load) {
      s = llm_->unload(name, kLlmUnloadDrain);
    } else if (dir.empty()) {
      s = Status::NotFound("generation model '{}' is not in the repository", name);
    } else {
      // A load of a loaded model reloads it (Triton's behaviour): the new one serves once READY.
      if (llm_->find(name)) (void)llm_->unload(name, kLlmUnloadDrain);
      s = llm_->load(name, dir);
      if (s.ok()) GPUOPT_LOG(info, "generation model '{}' READY (load API)", name);
    }
    if (!s.ok())
      s = Status(s.code(), (load ? "failed to load '" : "failed to unload '") + net::printable(name) + "': " + s.message());
    done(s);
  });
  return true;
}

void InferenceServer::poll_llm() {
  auto dirs = llm_dirs();
  for (auto it = llm_known_.begin(); it != llm_known_.end();) {
    if (dirs.count(it->first)) {
      ++it;
      continue;
    }
    Status s = llm_->unload(it->first, kLlmUnloadDrain);
    GPUOPT_LOG(warn, "repository poll: generation model '{}' removed{}{}", it->first, s.ok() ? ", unloaded" : ": ",
               s.ok() ? "" : s.message());
    it = llm_known_.erase(it);
  }
  for (const auto& [name, dir] : dirs) {
    std::string fp = files_fingerprint(dir);
    auto it = llm_known_.find(name);
    if (it != llm_known_.end() && it->second == fp) continue;
    bool reload = it != llm_known_.end();
    llm_known_[name] = fp;
    if (reload) (void)llm_->unload(name, kLlmUnloadDrain);
    Status s = llm_->load(name, dir);
    if (s.ok())
      GPUOPT_LOG(info, "repository poll: generation model '{}' {}", name, reload ? "reloaded" : "loaded");
    else
      GPUOPT_LOG(error, "repository poll: {}", s.message());
  }
}

void InferenceServer::llm_index(nlohmann::json& index, bool ready_only) const {
  std::set<std::string> listed;
  for (auto& e : llm_->index()) {
    listed.insert(e.value("name", ""));
    if (!ready_only || e.value("state", "") == "READY") index.push_back(e);
  }
  if (ready_only) return;
  for (const auto& [name, dir] : llm_dirs())
    if (!listed.count(name)) index.push_back({{"name", name}, {"state", "UNAVAILABLE"}, {"reason", "unloaded"}});
}

void InferenceServer::add_llm_routes(net::Router& r) {
  openai::add_openai_routes(r, *llm_, [this] { return shutting_down_.load(); });
  // /v1/embeddings (server/openai/embeddings.h) registers here when it is built.
}

}  // namespace gpuopt::server
