// The OpenAI and Triton-generate response bodies (responses.h).
#include "server/openai/responses.h"

#include <chrono>
#include <random>

namespace gpuopt::server::openai {

using ojson = nlohmann::ordered_json;

namespace {
std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string token_text(const llm::Tokenizer& tok, int64_t id) { return tok.decode({id}, false); }

ojson bytes_of(const std::string& s) {
  ojson a = ojson::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}
}  // namespace

std::string new_request_id(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}-{:016x}{:016x}", prefix, rng(), rng());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string finish_reason_name(const std::string& r) {
  if (r.empty()) return r;
  return r;
}

ojson Usage::json() const {
  ojson u = {{"prompt_tokens", prompt_tokens},
             {"completion_tokens", completion_tokens},
             {"total_tokens", prompt_tokens + completion_tokens}};
  if (cached_tokens > 0) u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return u;
}

ojson logprobs_json(const ResponseMeta& m, const llm::Tokenizer& tok, const std::vector<llm::SampledToken>& tokens,
                    size_t text_offset) {
  if (m.endpoint == Endpoint::kChat) {
    ojson content = ojson::array();
    for (const auto& t : tokens) {
      std::string s = token_text(tok, t.token);
      ojson top = ojson::array();
      for (const auto& x : t.top) {
        std::string ts = token_text(tok, x.token);
        top.push_back({{"token", ts}, {"logprob", x.logprob}, {"bytes", bytes_of(ts)}});
      }
      content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  ojson toks = ojson::array(), lps = ojson::array(), tops = ojson::array(), offs = ojson::array();
  size_t off = text_offset;
  for (const auto& t : tokens) {
    std::string s = token_text(tok, t.token);
    toks.push_back(s);
    lps.push_back(t.logprob);
    ojson top = ojson::object();
    for (const auto& x : t.top) {  // keyed by text: ids that decode alike keep the best entry
      std::string key = token_text(tok, x.token);
      if (!top.contains(key)) top[key] = x.logprob;
    }
    tops.push_back(top);
    offs.push_back(off);
    off += s.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

std::string completion_json(const ResponseMeta& m, const llm::Tokenizer& tok, const std::vector<Choice>& choices,
                            const Usage& usage) {
  ojson cs = ojson::array();
  for (const auto& c : choices) {
    ojson lp = m.logprobs ? logprobs_json(m, tok, c.tokens, 0) : ojson(nullptr);
    ojson fr = c.finish_reason.empty() ? ojson(nullptr) : ojson(finish_reason_name(c.finish_reason));
    if (m.endpoint == Endpoint::kChat)
      cs.push_back({{"index", c.index},
                    {"message", {{"role", "assistant"}, {"content", c.text}}},
                    {"logprobs", lp},
                    {"finish_reason", fr}});
    else
      cs.push_back({{"index", c.index}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", fr}});
  }
  ojson j = {{"id", m.id},
             {"object", object_name(m.endpoint, false)},
             {"created", m.created},
             {"model", m.model},
             {"choices", cs},
             {"usage", usage.json()}};
  if (m.endpoint == Endpoint::kChat) j["system_fingerprint"] = nullptr;
  return dump(j);
}

namespace {

std::string quoted(const std::string& s) { return dump(ojson(s)); }

// The chunk of chunk_event() without log-probabilities, written directly: it is built once per
// token of every streamed sequence on the engine's thread, and a JSON tree per chunk cost more
// than the rest of the callback. Byte for byte what the tree gives (ordered keys, same escaping).
std::string plain_chunk(const ResponseMeta& m, int index, const std::string& text, const std::string& finish_reason,
                        bool role, bool include_usage_null) {
  std::string out;
  out.reserve(160 + m.id.size() + m.model.size() + text.size());
  out += "data: {\"id\":";
  out += quoted(m.id);
  out += ",\"object\":\"";
  out += object_name(m.endpoint, true);
  out += "\",\"created\":";
  out += std::to_string(m.created);
  out += ",\"model\":";
  out += quoted(m.model);
  out += ",\"choices\":[{\"index\":";
  out += std::to_string(index);
  if (m.endpoint == Endpoint::kChat) {
    out += ",\"delta\":{";
    if (role) out += "\"role\":\"assistant\"";
    if (role || !text.empty()) {
      if (role) out += ',';
      out += "\"content\":";
      out += quoted(text);
    }
    out += '}';
  } else {
    out += ",\"text\":";
    out += quoted(text);
  }
  out += ",\"logprobs\":null,\"finish_reason\":";
  out += finish_reason.empty() ? std::string("null") : quoted(finish_reason_name(finish_reason));
  out += "}]";
  if (include_usage_null) out += ",\"usage\":null";
  out += "}\n\n";
  return out;
}

}  // namespace

std::string chunk_event(const ResponseMeta& m, const llm::Tokenizer& tok, int index, const std::string& text,
                        const std::vector<llm::SampledToken>& tokens, size_t text_offset,
                        const std::string& finish_reason, bool role, bool include_usage_null) {
  if (!(m.logprobs && !tokens.empty())) return plain_chunk(m, index, text, finish_reason, role, include_usage_null);
  ojson lp = logprobs_json(m, tok, tokens, text_offset);
  ojson fr = finish_reason.empty() ? ojson(nullptr) : ojson(finish_reason_name(finish_reason));
  ojson choice;
  if (m.endpoint == Endpoint::kChat) {
    ojson delta = ojson::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice = {{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", fr}};
  } else {
    choice = {{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", fr}};
  }
  ojson j = {{"id", m.id},
             {"object", object_name(m.endpoint, true)},
             {"created", m.created},
             {"model", m.model},
             {"choices", ojson::array({choice})}};
  if (include_usage_null) j["usage"] = nullptr;
  return "data: " + dump(j) + "\n\n";
}

std::string usage_event(const ResponseMeta& m, const Usage& usage) {
  ojson j = {{"id", m.id},
             {"object", object_name(m.endpoint, true)},
             {"created", m.created},
             {"model", m.model},
             {"choices", ojson::array()},
             {"usage", usage.json()}};
  return "data: " + dump(j) + "\n\n";
}

std::string generate_json(const std::string& model, const std::string& text, const std::string& finish_reason,
                          const Usage& usage) {
  ojson j = {{"model_name", model},
             {"model_version", "1"},
             {"text_output", text},
             {"finish_reason", finish_reason_name(finish_reason)},
             {"prompt_tokens", usage.prompt_tokens},
             {"completion_tokens", usage.completion_tokens}};
  return dump(j);
}

std::string generate_event(const std::string& model, const std::string& text, const std::string& finish_reason) {
  ojson j = {{"model_name", model}, {"model_version", "1"}, {"text_output", text}};
  if (!finish_reason.empty()) j["finish_reason"] = finish_reason_name(finish_reason);
  return "data: " + dump(j) + "\n\n";
}

}  // namespace gpuopt::server::openai
