// A model's chat template: the Jinja template of its tokenizer_config.json (`chat_template`, a
// string or a list of {"name", "template"}), rendered with google/minja (third_party/minja) as
// Hugging Face's apply_chat_template does: trim_blocks and lstrip_blocks, with `messages`,
// `add_generation_prompt`, `bos_token`, `eos_token` and `raise_exception`. Rendering is bounded
// (output bytes, steps, nesting, wall time): a template that loops or explodes gives an error.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto t, ChatTemplate::from_tokenizer_config(text, "m/tokenizer_config.json"));
//   nlohmann::ordered_json msgs = {{{"role", "user"}, {"content", "Hi"}}};
//   GPUOPT_ASSIGN_OR_RETURN(std::string prompt, t->render(msgs, /*add_generation_prompt=*/true));
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minja {
class TemplateNode;
}

namespace gpuopt::server::openai {

struct ChatTemplateLimits {
  size_t max_output = size_t{8} << 20;  // bytes of prompt text (and of any one string built)
  size_t max_steps = 2'000'000;          // template nodes rendered
  int max_depth = 128;                   // nested renders (macro recursion)
  std::chrono::milliseconds time_limit{2000};
};

class ChatTemplate {
 public:
  // The tokenizer_config.json's text. NotFound when it has no chat_template; InvalidArgument
  // naming `where` when a template does not parse.
  static Result<std::shared_ptr<ChatTemplate>> from_tokenizer_config(const std::string& json_text,
                                                                     const std::string& where);
  // One template source (name "default").
  static Result<std::shared_ptr<ChatTemplate>> from_source(const std::string& source, std::string bos_token,
                                                           std::string eos_token, const std::string& where);

  // The prompt for `messages` ([{"role", "content"}, ...]). InvalidArgument with the template's
  // message (raise_exception) or the limit it hit.
  Result<std::string> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const std::string& name = "default") const;
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  ChatTemplateLimits limits;

 private:
  std::map<std::string, std::shared_ptr<minja::TemplateNode>> templates_;
  std::string bos_, eos_;
};

}  // namespace gpuopt::server::openai
