// POST /v1/embeddings (embeddings.h): the request's inputs checked and tokenized, embedded, and
// the answer in OpenAI's shape.
#include "server/openai/embeddings.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <variant>

namespace gpuopt::server::openai {

using nlohmann::json;

namespace {

// OpenAI's error body: {"error": {"message", "type", "param", "code"}}.
net::HttpResponse oai_error(int status, std::string message, std::string_view param = {},
                            std::string_view code = {}) {
  json e = {{"message", net::printable(message, 1024)},
            {"type", status >= 500 ? "server_error" : "invalid_request_error"},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}};
  return net::HttpResponse::json(status, json{{"error", e}}.dump());
}

std::string base64(const void* data, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    for (int s : {18, 12, 6, 0}) out += k[(v >> s) & 63];
  }
  if (i < n) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < n) v |= uint32_t{p[i + 1]} << 8;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

struct Parsed {
  std::vector<std::vector<int64_t>> inputs;
  bool base64 = false;
};

// The inputs as token ids, or the 400 answer.
std::variant<Parsed, net::HttpResponse> parse(const json& body, Embedder& e, size_t max_inputs) {
  Parsed p;
  if (body.contains("dimensions") && !body["dimensions"].is_null())
    return oai_error(400, "'dimensions' is not supported: this model's embeddings have a fixed size of " +
                              std::to_string(e.dimensions()), "dimensions");
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      return oai_error(400, fmt::format("'encoding_format' must be \"float\" or \"base64\", not {:.100}", f.dump()),
                       "encoding_format");
    p.base64 = f == "base64";
  }
  if (!body.contains("input")) return oai_error(400, "'input' is required", "input");
  const json& in = body["input"];
  const auto& tok = e.tokenizer();
  const int64_t vocab = tok.vocab_size();
  auto ids_of = [&](const json& a, size_t index) -> std::variant<std::vector<int64_t>, net::HttpResponse> {
    std::vector<int64_t> ids;
    for (const json& x : a) {
      if (!x.is_number_integer())
        return oai_error(400, fmt::format("input[{}]: token ids must be integers", index), "input");
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= vocab)
        return oai_error(400, fmt::format("input[{}]: token id {} is not in 0..{}", index, id, vocab - 1), "input");
      ids.push_back(id);
    }
    return ids;
  };
  std::vector<json> items;
  bool one_id_list = in.is_array() && !in.empty() && in[0].is_number();
  if (in.is_string() || one_id_list) {
    items.push_back(in);
  } else if (in.is_array() && !in.empty()) {
    for (const json& x : in) items.push_back(x);
  } else {
    return oai_error(400, "'input' must be a non-empty string, array of strings, array of token ids or array of "
                          "token-id arrays", "input");
  }
  if (items.size() > max_inputs)
    return oai_error(400, fmt::format("'input' has {} items, more than {}", items.size(), max_inputs), "input");
  for (size_t i = 0; i < items.size(); ++i) {
    const json& x = items[i];
    std::vector<int64_t> ids;
    if (x.is_string()) {
      const auto& s = x.get_ref<const std::string&>();
      if (s.empty()) return oai_error(400, fmt::format("input[{}] is an empty string", i), "input");
      // Refused before tokenizing when even 64 bytes a token would not fit the context: a 1 GB
      // string costs no tokenizer time. Text averages far fewer (only degenerate input, such as
      // WordPiece's one [UNK] for a word of up to 100 characters, or dropped control characters,
      // could fit in fewer tokens and is refused anyway).
      if (static_cast<int64_t>(s.size()) > e.max_input_tokens() * 64)
        return oai_error(400, fmt::format("input[{}] ({} bytes) is longer than this model's maximum context of {} tokens",
                                          i, s.size(), e.max_input_tokens()), "input");
      ids = tok.encode(s, true);
    } else if (x.is_array() && !x.empty()) {
      auto r = ids_of(x, i);
      if (auto* err = std::get_if<net::HttpResponse>(&r)) return std::move(*err);
      ids = std::move(std::get<std::vector<int64_t>>(r));
    } else {
      return oai_error(400, fmt::format("input[{}] must be a non-empty string or a non-empty array of token ids", i),
                       "input");
    }
    if (ids.empty()) return oai_error(400, fmt::format("input[{}] has no tokens", i), "input");
    if (static_cast<int64_t>(ids.size()) > e.max_input_tokens())
      return oai_error(400, fmt::format("input[{}] has {} tokens, more than this model's maximum context of {} tokens",
                                        i, ids.size(), e.max_input_tokens()), "input");
    p.inputs.push_back(std::move(ids));
  }
  return p;
}

}  // namespace

void add_embedding_routes(net::Router& router, EmbedderLookup lookup, size_t max_inputs) {
  router.post("/v1/embeddings", [lookup = std::move(lookup), max_inputs](const net::HttpRequest& req) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return oai_error(400, "the request body is not a JSON object");
    if (!body.contains("model") || !body["model"].is_string())
      return oai_error(400, "'model' is required (a string)", "model");
    const std::string model = body["model"];
    std::shared_ptr<Embedder> e = lookup(model);
    if (!e)
      return oai_error(404, fmt::format("The model '{}' does not exist or does not serve embeddings", model), "model",
                       "model_not_found");
    auto parsed = parse(body, *e, max_inputs);
    if (auto* err = std::get_if<net::HttpResponse>(&parsed)) return std::move(*err);
    Parsed& p = std::get<Parsed>(parsed);
    auto vecs = e->embed(p.inputs);
    if (!vecs.ok())
      return oai_error(vecs.status().code() == StatusCode::kInvalidArgument ? 400 : 500,
                       vecs.status().message());
    int64_t tokens = 0;
    for (const auto& x : p.inputs) tokens += static_cast<int64_t>(x.size());
    json data = json::array();
    for (size_t i = 0; i < vecs->size(); ++i) {
      const auto& v = (*vecs)[i];
      json emb = p.base64 ? json(base64(v.data(), v.size() * sizeof(float))) : json(v);
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(emb)}});
    }
    json out = {{"object", "list"},
                {"data", std::move(data)},
                {"model", model},
                {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    return net::HttpResponse::json(200, out.dump());
  });
}

}  // namespace gpuopt::server::openai
