// Chat templates through minja (third_party/minja; the only file that includes it: it is large).
#include "server/openai/chat_template.h"

#include <minja/minja.hpp>

namespace gpuopt::server::openai {

namespace {

// bos_token / eos_token: a string, or an AddedToken object {"content": "<s>", ...}.
std::string token_text(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"];
  return "";
}

Result<std::shared_ptr<minja::TemplateNode>> parse(const std::string& source, const std::string& where) {
  try {
    return minja::Parser::parse(source, {/*trim_blocks=*/true, /*lstrip_blocks=*/true,
                                         /*keep_trailing_newline=*/false});
  } catch (const std::exception& e) {
    return Status::InvalidArgument("{}: chat template does not parse: {}", where, e.what());
  }
}

}  // namespace

Result<std::shared_ptr<ChatTemplate>> ChatTemplate::from_source(const std::string& source, std::string bos_token,
                                                                std::string eos_token, const std::string& where) {
  auto t = std::make_shared<ChatTemplate>();
  GPUOPT_ASSIGN_OR_RETURN(t->templates_["default"], parse(source, where));
  t->bos_ = std::move(bos_token);
  t->eos_ = std::move(eos_token);
  return t;
}

Result<std::shared_ptr<ChatTemplate>> ChatTemplate::from_tokenizer_config(const std::string& json_text,
                                                                          const std::string& where) {
  nlohmann::json cfg = nlohmann::json::parse(json_text, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return Status::InvalidArgument("{}: not a JSON object", where);
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return Status::NotFound("{}: no chat_template", where);
  auto t = std::make_shared<ChatTemplate>();
  t->bos_ = token_text(cfg, "bos_token");
  t->eos_ = token_text(cfg, "eos_token");
  if (it->is_string()) {
    GPUOPT_ASSIGN_OR_RETURN(t->templates_["default"], parse(it->get<std::string>(), where));
  } else if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const auto& e : *it) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string())
        return Status::InvalidArgument("{}: chat_template list entries need string 'name' and 'template'", where);
      GPUOPT_ASSIGN_OR_RETURN(t->templates_[e["name"].get<std::string>()],
                              parse(e["template"].get<std::string>(), where + " (" + e["name"].get<std::string>() + ")"));
    }
    if (t->templates_.empty()) return Status::NotFound("{}: chat_template is an empty list", where);
  } else {
    return Status::InvalidArgument("{}: chat_template is neither a string nor a list", where);
  }
  return t;
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const std::string& name) const {
  auto it = templates_.find(name);
  if (it == templates_.end()) it = templates_.find("default");
  if (it == templates_.end()) it = templates_.begin();  // a list without "default": its first
  minja::RenderLimits lim;
  lim.max_output = limits.max_output;
  lim.max_steps = limits.max_steps;
  lim.max_depth = limits.max_depth;
  lim.deadline = std::chrono::steady_clock::now() + limits.time_limit;
  struct Scope {
    minja::RenderLimits* prev;
    ~Scope() { minja::render_limits() = prev; }
  } scope{minja::render_limits()};
  minja::render_limits() = &lim;
  try {
    auto ctx = minja::Context::make(minja::Value(nlohmann::ordered_json{
        {"messages", messages}, {"add_generation_prompt", add_generation_prompt}}));
    ctx->set("bos_token", bos_);
    ctx->set("eos_token", eos_);
    std::string out = it->second->render(ctx);
    if (out.size() > limits.max_output)
      return Status::InvalidArgument("chat template: the prompt is over {} bytes", limits.max_output);
    return out;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    // Each nesting level appends the template location: keep the first lines.
    if (msg.size() > 400) msg = msg.substr(0, 400) + "...";
    return Status::InvalidArgument("chat template: {}", msg);
  }
}

}  // namespace gpuopt::server::openai
