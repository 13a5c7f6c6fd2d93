// Parsing the OpenAI and Triton-generate request bodies (protocol.h).
#include "server/openai/protocol.h"

#include <cmath>
#include <limits>

namespace gpuopt::server::openai {

using nlohmann::json;

std::string error_json(const ApiError& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

net::HttpResponse error_response(const ApiError& e) { return net::HttpResponse::json(e.status, error_json(e)); }

ApiError make_error(int status, std::string message, std::string param) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  if (status == 404) {
    e.type = "NotFoundError";
    e.code = "model_not_found";
  } else if (status == 429) {
    e.type = "RateLimitError";
  } else if (status == 503) {
    e.type = "ServiceUnavailableError";
  } else if (status >= 500) {
    e.type = "InternalServerError";
  }
  return e;
}

llm::SamplingParams GenerationRequest::sampling(int64_t max_new_tokens, int index) const {
  llm::SamplingParams p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.min_p = min_p;
  p.repetition_penalty = repetition_penalty;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  if (seed) p.seed = *seed + static_cast<uint64_t>(index);
  p.max_new_tokens = max_new_tokens;
  p.stop = stop;
  p.stop_token_ids = stop_token_ids;
  p.ignore_eos = ignore_eos;
  p.logprobs = logprobs ? std::max(top_logprobs, 0) : 0;
  return p;
}

namespace {

// Throws a ParseError naming the field; the entry points turn it into an ApiError.
struct ParseError {
  std::string message, param;
};

[[noreturn]] void fail(const std::string& param, const std::string& what) { throw ParseError{param + ": " + what, param}; }

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

double number(const json& j, const char* key, double def, double lo, double hi) {
  if (!present(j, key)) return def;
  const json& v = j[key];
  if (!v.is_number()) fail(key, "must be a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, d));
  return d;
}

int64_t integer(const json& j, const char* key, int64_t def, int64_t lo, int64_t hi) {
  if (!present(j, key)) return def;
  const json& v = j[key];
  int64_t x = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(key, "is too large");
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
             std::fabs(v.get<double>()) < 9e18) {
    x = static_cast<int64_t>(v.get<double>());  // 1e9 written as a float
  } else {
    fail(key, "must be an integer");
  }
  if (x < lo || x > hi) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
  return x;
}

bool boolean(const json& j, const char* key, bool def) {
  if (!present(j, key)) return def;
  if (!j[key].is_boolean()) fail(key, "must be true or false");
  return j[key].get<bool>();
}

std::vector<int64_t> token_ids(const json& a, const char* param) {
  std::vector<int64_t> ids;
  ids.reserve(a.size());
  for (const auto& x : a) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0) fail(param, "token ids must be non-negative integers");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

void parse_common(const json& j, GenerationRequest* r) {
  if (!present(j, "model")) fail("model", "is required");
  if (!j["model"].is_string()) fail("model", "must be a string");
  r->model = j["model"].get<std::string>();
  r->n = static_cast<int>(integer(j, "n", 1, 1, kMaxN));
  if (present(j, "best_of") && integer(j, "best_of", 1, 1, kMaxN) != r->n) fail("best_of", "other than n is not supported");
  if (present(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r->stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > kMaxStopStrings) fail("stop", fmt::format("at most {} stop strings", kMaxStopStrings));
      for (const auto& x : s) {
        if (!x.is_string()) fail("stop", "must be a string or a list of strings");
        r->stop.push_back(x.get<std::string>());
      }
    } else {
      fail("stop", "must be a string or a list of strings");
    }
    for (const auto& x : r->stop)
      if (x.empty()) fail("stop", "stop strings must not be empty");
  }
  if (present(j, "stop_token_ids")) {
    if (!j["stop_token_ids"].is_array()) fail("stop_token_ids", "must be a list of token ids");
    r->stop_token_ids = token_ids(j["stop_token_ids"], "stop_token_ids");
  }
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  if (present(j, "max_completion_tokens")) r->max_tokens = integer(j, "max_completion_tokens", 0, 1, kBig);
  else if (present(j, "max_tokens")) r->max_tokens = integer(j, "max_tokens", 0, 1, kBig);
  r->temperature = number(j, "temperature", 1.0, 0.0, 2.0);
  r->top_p = number(j, "top_p", 1.0, 0.0, 1.0);
  if (r->top_p <= 0) fail("top_p", "must be in (0, 1]");
  r->top_k = integer(j, "top_k", 0, -1, 1 << 30);
  if (r->top_k < 0) r->top_k = 0;  // vLLM: -1 = off
  r->min_p = number(j, "min_p", 0.0, 0.0, 1.0);
  r->repetition_penalty = number(j, "repetition_penalty", 1.0, 1e-6, 100.0);
  r->presence_penalty = number(j, "presence_penalty", 0.0, -2.0, 2.0);
  r->frequency_penalty = number(j, "frequency_penalty", 0.0, -2.0, 2.0);
  if (present(j, "seed")) {
    const json& s = j["seed"];
    if (!s.is_number_integer()) fail("seed", "must be an integer");
    r->seed = s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
  }
  r->stream = boolean(j, "stream", false);
  if (present(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) fail("stream_options", "must be an object");
    if (!r->stream) fail("stream_options", "is only allowed with stream: true");
    r->include_usage = boolean(so, "include_usage", false);
  }
  r->ignore_eos = boolean(j, "ignore_eos", false);
  r->skip_special_tokens = boolean(j, "skip_special_tokens", true);
  if (present(j, "user")) {
    if (!j["user"].is_string()) fail("user", "must be a string");
    r->user = j["user"].get<std::string>();
  }
}

std::optional<json> parse_object(std::string_view body, ApiError* err) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    *err = make_error(400, "the request body is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    *err = make_error(400, "the request body must be a JSON object");
    return std::nullopt;
  }
  return j;
}

template <typename F>
std::optional<GenerationRequest> guarded(std::string_view body, ApiError* err, F f) {
  auto j = parse_object(body, err);
  if (!j) return std::nullopt;
  try {
    GenerationRequest r;
    f(*j, &r);
    return r;
  } catch (const ParseError& e) {
    *err = make_error(400, e.message, e.param);
  } catch (const json::exception& e) {
    *err = make_error(400, std::string("malformed request: ") + e.what());
  }
  return std::nullopt;
}

}  // namespace

std::optional<GenerationRequest> parse_completion_request(std::string_view body, ApiError* err) {
  return guarded(body, err, [](const json& j, GenerationRequest* r) {
    r->endpoint = Endpoint::kCompletions;
    parse_common(j, r);
    if (!present(j, "prompt")) fail("prompt", "is required");
    const json& p = j["prompt"];
    auto one_text = [&](const json& s) { r->prompts.push_back({.text = s.get<std::string>(), .ids = {}, .is_ids = false}); };
    auto one_ids = [&](const json& a) {
      if (a.empty()) fail("prompt", "a token-id prompt must not be empty");
      r->prompts.push_back({.text = {}, .ids = token_ids(a, "prompt"), .is_ids = true});
    };
    if (p.is_string()) {
      one_text(p);
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      one_ids(p);
    } else if (p.is_array() && !p.empty()) {
      if (p.size() > kMaxPrompts) fail("prompt", fmt::format("at most {} prompts in one request", kMaxPrompts));
      for (const auto& x : p) {
        if (x.is_string()) one_text(x);
        else if (x.is_array()) one_ids(x);
        else fail("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists");
      }
    } else {
      fail("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists");
    }
    if (present(j, "logprobs")) {
      r->top_logprobs = static_cast<int>(integer(j, "logprobs", 0, 0, kMaxTopLogprobs));
      r->logprobs = true;
    }
    r->echo = boolean(j, "echo", false);
    if (r->echo) fail("echo", "is not supported");
    if (present(j, "suffix")) fail("suffix", "is not supported");
  });
}

std::optional<GenerationRequest> parse_chat_request(std::string_view body, ApiError* err) {
  return guarded(body, err, [](const json& j, GenerationRequest* r) {
    r->endpoint = Endpoint::kChat;
    parse_common(j, r);
    if (!present(j, "messages")) fail("messages", "is required");
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) fail("messages", "must be a non-empty list");
    r->messages = nlohmann::ordered_json::array();
    for (size_t i = 0; i < m.size(); ++i) {
      const json& x = m[i];
      std::string where = fmt::format("messages[{}]", i);
      if (!x.is_object()) fail(where, "must be an object");
      if (!x.contains("role") || !x["role"].is_string()) fail(where + ".role", "must be a string");
      std::string role = x["role"].get<std::string>();
      if (role != "system" && role != "user" && role != "assistant" && role != "developer" && role != "tool")
        fail(where + ".role", fmt::format("'{}' is not one of system, developer, user, assistant, tool", role));
      std::string content;
      if (present(x, "content")) {
        const json& c = x["content"];
        if (c.is_string()) {
          content = c.get<std::string>();
        } else if (c.is_array()) {  // [{"type": "text", "text": "..."}]: text parts joined by "\n"
          for (size_t k = 0; k < c.size(); ++k) {
            const json& part = c[k];
            if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
                !part["text"].is_string())
              fail(fmt::format("{}.content[{}]", where, k), "only {\"type\": \"text\", \"text\": ...} parts are supported");
            if (k) content += "\n";
            content += part["text"].get<std::string>();
          }
        } else {
          fail(where + ".content", "must be a string or a list of content parts");
        }
      } else if (role != "assistant") {
        fail(where + ".content", "is required");
      }
      nlohmann::ordered_json msg = {{"role", role}, {"content", content}};
      if (present(x, "name") && x["name"].is_string()) msg["name"] = x["name"];
      r->messages.push_back(std::move(msg));
    }
    r->add_generation_prompt = boolean(j, "add_generation_prompt", true);
    r->logprobs = boolean(j, "logprobs", false);
    if (present(j, "top_logprobs")) {
      if (!r->logprobs) fail("top_logprobs", "needs logprobs: true");
      r->top_logprobs = static_cast<int>(integer(j, "top_logprobs", 0, 0, kMaxTopLogprobs));
    }
    if (present(j, "tools") && j["tools"].is_array() && !j["tools"].empty()) fail("tools", "are not supported");
  });
}

std::optional<GenerationRequest> parse_generate_request(std::string_view body, const std::string& model,
                                                        ApiError* err) {
  return guarded(body, err, [&](const json& j, GenerationRequest* r) {
    r->endpoint = Endpoint::kGenerate;
    if (!present(j, "text_input") || !j["text_input"].is_string()) fail("text_input", "must be a string");
    r->prompts.push_back({.text = j["text_input"].get<std::string>(), .ids = {}, .is_ids = false});
    // Parameters in "parameters" (Triton's form) or at the top level (TensorRT-LLM's examples).
    json p = j.contains("parameters") && j["parameters"].is_object() ? j["parameters"] : json::object();
    for (const auto& [k, v] : j.items())
      if (k != "text_input" && k != "parameters" && !p.contains(k)) p[k] = v;
    if (p.contains("max_tokens") && !p.contains("max_new_tokens")) p["max_new_tokens"] = p["max_tokens"];
    p.erase("max_tokens");
    if (p.contains("max_new_tokens")) p["max_tokens"] = p["max_new_tokens"];
    p["model"] = model;
    p.erase("n");
    p.erase("stream_options");
    if (p.contains("stop") && p["stop"].is_array() && p["stop"].empty()) p.erase("stop");
    parse_common(p, r);
  });
}

}  // namespace gpuopt::server::openai
