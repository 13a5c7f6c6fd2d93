// gpuopt perf (OpenAI mode): the prompts of a run — synthetic (random tokens of a tokenizer's
// vocabulary, or token ids) with sampled input/output lengths, or a JSONL file — and the request
// bodies built from them.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli/perf_llm_internal.h"
#include "llm/tokenizer.h"

namespace gpuopt::cli::llmperf {

using nlohmann::json;

namespace {

// A token whose text alone is printable UTF-8 (no control bytes, no U+FFFD, no half
// characters): random prompts made of such tokens are text a user could have typed.
bool clean_token(const llm::Tokenizer& tok, int64_t id) {
  const std::string s = tok.decode({id}, true);
  if (s.empty() || s.find("\xEF\xBF\xBD") != std::string::npos) return false;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 1 && (c < 0x20 || c == 0x7f))) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

// Text of about `n` tokens: random non-special ids decoded, re-encoded and trimmed, a few
// rounds (a decoded id sequence does not always encode back to itself); the count is what the
// tokenizer gives for the final text.
std::pair<std::string, int64_t> random_text(const llm::Tokenizer& tok, const std::vector<int64_t>& pool,
                                            NumpyRandom& rng, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(pool[static_cast<size_t>(rng.integer(static_cast<int64_t>(pool.size())))]);
  std::string text = tok.decode(ids, true);
  for (int round = 0; round < 4; ++round) {
    auto back = tok.encode(text, false);
    if (static_cast<int64_t>(back.size()) == n) return {text, n};
    if (static_cast<int64_t>(back.size()) > n) {
      back.resize(static_cast<size_t>(n));
    } else {
      while (static_cast<int64_t>(back.size()) < n)
        back.push_back(pool[static_cast<size_t>(rng.integer(static_cast<int64_t>(pool.size())))]);
    }
    text = tok.decode(back, true);
  }
  return {text, static_cast<int64_t>(tok.encode(text, false).size())};
}

Result<std::vector<Prompt>> from_file(const Options& o, const llm::Tokenizer* tok, const std::vector<int64_t>& out_len) {
  std::ifstream f(o.input_file);
  if (!f) return Status::NotFound("--input-file '{}': cannot be read", o.input_file);
  std::vector<Prompt> lines;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      return Status::InvalidArgument("--input-file '{}' line {}: not JSON: {}", o.input_file, no, e.what());
    }
    Prompt p;
    auto bad = [&](std::string_view what) {
      return Status::InvalidArgument("--input-file '{}' line {}: {}", o.input_file, no, what);
    };
    if (!j.is_object()) return bad("expected an object with \"text\", \"prompt\" or \"messages\"");
    if (j.contains("messages")) {
      if (!j["messages"].is_array() || j["messages"].empty()) return bad("\"messages\" must be a non-empty array");
      if (o.endpoint_type != "chat") return bad("\"messages\" needs --endpoint-type chat");
      p.messages = j["messages"];
    } else {
      const json& t = j.contains("text") ? j["text"] : j.contains("prompt") ? j["prompt"] : json();
      if (t.is_string()) {
        p.text = t.get<std::string>();
      } else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const json& x) { return x.is_number_integer(); })) {
        if (o.endpoint_type == "chat") return bad("token-id prompts need --endpoint-type completions");
        p.ids = t.get<std::vector<int64_t>>();
      } else {
        return bad("expected \"text\" or \"prompt\" (a string or a list of token ids), or \"messages\"");
      }
    }
    for (const char* k : {"max_tokens", "output_tokens"})
      if (j.contains(k)) {
        if (!j[k].is_number_integer() || j[k].get<int64_t>() < 1) return bad(fmt::format("\"{}\" must be a positive integer", k));
        p.max_tokens = j[k].get<int64_t>();
      }
    if (!p.ids.empty())
      p.input_tokens = static_cast<int64_t>(p.ids.size());
    else if (tok && !p.text.empty())
      p.input_tokens = static_cast<int64_t>(tok->encode(p.text, false).size());
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return Status::InvalidArgument("--input-file '{}': no prompts", o.input_file);
  std::vector<Prompt> out;
  for (int64_t i = 0; i < o.num_prompts + o.warmup; ++i) {
    Prompt p = lines[static_cast<size_t>(i) % lines.size()];
    if (p.max_tokens <= 0) p.max_tokens = out_len[static_cast<size_t>(i)];
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Result<std::vector<Prompt>> make_prompts(const Options& o, NumpyRandom& rng) {
  const int64_t n = o.num_prompts + o.warmup;
  std::unique_ptr<llm::Tokenizer> tok;
  if (!o.tokenizer.empty()) {
    std::filesystem::path p(o.tokenizer);
    if (std::filesystem::is_directory(p)) p /= "tokenizer.json";
    GPUOPT_ASSIGN_OR_RETURN(tok, llm::Tokenizer::from_file(p));
  }
  // Lengths first (inputs, then outputs), so a test draws them the same way with numpy.
  auto in_len = sample_lengths(rng, n, o.input_mean, o.input_stddev);
  auto out_len = sample_lengths(rng, n, o.output_mean, o.output_stddev);
  if (!o.input_file.empty()) return from_file(o, tok.get(), out_len);
  if (!tok && o.endpoint_type == "chat")
    return Status::InvalidArgument("synthetic chat prompts need --tokenizer (or use --input-file, or --endpoint-type completions for token-id prompts)");
  std::vector<int64_t> pool;
  if (tok) {
    for (int64_t id = 0; id < tok->vocab_size(); ++id)
      if (!tok->is_special(id) && clean_token(*tok, id)) pool.push_back(id);
    if (pool.empty()) return Status::InvalidArgument("--tokenizer '{}': no printable non-special tokens", o.tokenizer);
  } else {
    for (int64_t id = 0; id < o.vocab_size; ++id) pool.push_back(id);
  }
  std::vector<Prompt> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Prompt& p = out[static_cast<size_t>(i)];
    p.max_tokens = out_len[static_cast<size_t>(i)];
    if (tok) {
      std::tie(p.text, p.input_tokens) = random_text(*tok, pool, rng, in_len[static_cast<size_t>(i)]);
    } else {
      for (int64_t k = 0; k < in_len[static_cast<size_t>(i)]; ++k)
        p.ids.push_back(pool[static_cast<size_t>(rng.integer(static_cast<int64_t>(pool.size())))]);
      p.input_tokens = static_cast<int64_t>(p.ids.size());
    }
  }
  return out;
}

std::string request_body(const Options& o, const Prompt& p) {
  // As `vllm bench serve` sends them: greedy, streamed, with the usage in the last chunk.
  json b = {{"model", o.model},
            {"max_tokens", p.max_tokens},
            {"temperature", 0.0},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  if (o.endpoint_type == "chat") {
    b["messages"] = p.messages.is_null() ? json::array({{{"role", "user"}, {"content", p.text}}}) : p.messages;
  } else if (!p.ids.empty()) {
    b["prompt"] = p.ids;
  } else {
    b["prompt"] = p.text;
  }
  if (o.ignore_eos) b["ignore_eos"] = true;
  return b.dump();
}

}  // namespace gpuopt::cli::llmperf
