// The inference server's generation models: found in the repositories (or named with
// --llm-model), loaded at start, routed through the OpenAI API and Triton's generate extension.
#include <filesystem>

#include "core/log.h"
#include "server/inference_server.h"
#include "server/openai/llm_models.h"
#include "server/openai/routes.h"

namespace gpuopt::server {

namespace fs = std::filesystem;

Status InferenceServer::load_llm_models() {
  llm_ = std::make_unique<openai::LlmModels>(opt_.llm ? *opt_.llm : openai::LlmServeOptions{});
  std::vector<std::pair<std::string, fs::path>> found;
  std::error_code ec;
  std::vector<std::string> roots;
  if (fs::is_directory(opt_.repo.path, ec)) roots.push_back(opt_.repo.path);
  roots.insert(roots.end(), opt_.repo.extra_paths.begin(), opt_.repo.extra_paths.end());
  for (const auto& root : roots)
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory(ec) && !e.path().filename().string().starts_with(".") && openai::is_llm_model_dir(e.path()))
        found.emplace_back(e.path().filename().string(), e.path());
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

void InferenceServer::add_llm_routes(net::Router& r) {
  openai::add_openai_routes(r, *llm_, [this] { return shutting_down_.load(); });
  // /v1/embeddings (server/openai/embeddings.h) registers here when it is built.
}

}  // namespace gpuopt::server
