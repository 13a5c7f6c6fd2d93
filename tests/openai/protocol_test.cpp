// The OpenAI / Triton-generate request parser and the response shapes.
#include "server/openai/protocol.h"
#include "server/openai/responses.h"

#include <gtest/gtest.h>

namespace gpuopt::server::openai {
namespace {

using nlohmann::json;

GenerationRequest completion(const std::string& body) {
  ApiError err;
  auto r = parse_completion_request(body, &err);
  EXPECT_TRUE(r.has_value()) << err.message;
  return r.value_or(GenerationRequest{});
}

ApiError completion_error(const std::string& body) {
  ApiError err;
  EXPECT_FALSE(parse_completion_request(body, &err).has_value()) << body;
  return err;
}

TEST(OpenAiParse, CompletionPromptForms) {
  auto a = completion(R"({"model": "m", "prompt": "hello"})");
  ASSERT_EQ(a.prompts.size(), 1u);
  EXPECT_EQ(a.prompts[0].text, "hello");
  EXPECT_FALSE(a.prompts[0].is_ids);
  auto b = completion(R"({"model": "m", "prompt": ["a", "b"]})");
  ASSERT_EQ(b.prompts.size(), 2u);
  EXPECT_EQ(b.prompts[1].text, "b");
  auto c = completion(R"({"model": "m", "prompt": [1, 2, 3]})");
  ASSERT_EQ(c.prompts.size(), 1u);
  EXPECT_TRUE(c.prompts[0].is_ids);
  EXPECT_EQ(c.prompts[0].ids, (std::vector<int64_t>{1, 2, 3}));
  auto d = completion(R"({"model": "m", "prompt": [[1, 2], [3]]})");
  ASSERT_EQ(d.prompts.size(), 2u);
  EXPECT_EQ(d.prompts[1].ids, (std::vector<int64_t>{3}));
}

TEST(OpenAiParse, CompletionParameters) {
  auto r = completion(R"({"model": "m", "prompt": "x", "n": 3, "stop": ["\n", "END"], "max_tokens": 7,
      "temperature": 0, "top_p": 0.5, "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -1,
      "logprobs": 2, "stream": true, "stream_options": {"include_usage": true}, "user": "u",
      "some_vendor_field": {"x": 1}})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "u");
  auto sp = r.sampling(7, 2);
  EXPECT_EQ(sp.seed, 44u);  // seed + choice index
  EXPECT_EQ(sp.max_new_tokens, 7);
  EXPECT_EQ(sp.logprobs, 2);
  EXPECT_EQ(sp.presence_penalty, 0.5);
  EXPECT_EQ(sp.frequency_penalty, -1.0);
  EXPECT_EQ(completion(R"({"model": "m", "prompt": "x", "stop": "S"})").stop, (std::vector<std::string>{"S"}));
  EXPECT_EQ(completion(R"({"model": "m", "prompt": "x", "max_tokens": 1e9})").max_tokens, 1000000000);
}

TEST(OpenAiParse, ErrorsNameTheField) {
  EXPECT_EQ(completion_error("{not json").message, "the request body is not valid JSON");
  EXPECT_EQ(completion_error("[1]").status, 400);
  EXPECT_EQ(completion_error(R"({"prompt": "x"})").param, "model");
  EXPECT_EQ(completion_error(R"({"model": "m"})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": 3})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": [-1]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "n": 0})").param, "n");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "temperature": 3})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "top_p": 0})").param, "top_p");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "stop": [1]})").param, "stop");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "stop": ""})").param, "stop");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logprobs": 99})").param, "logprobs");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})").param,
            "stream_options");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "echo": true})").param, "echo");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "seed": "s"})").param, "seed");
}

TEST(OpenAiParse, ChatMessages) {
  ApiError err;
  auto r = parse_chat_request(R"({"model": "m", "messages": [{"role": "system", "content": "S"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 5, "max_tokens": 9})",
                              &err);
  ASSERT_TRUE(r.has_value()) << err.message;
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[1]["content"], "a\nb");
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->top_logprobs, 3);
  EXPECT_EQ(r->max_tokens, 5);  // max_completion_tokens wins
  for (const char* bad : {R"({"model": "m", "messages": []})", R"({"model": "m", "messages": [{"content": "x"}]})",
                          R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})",
                          R"({"model": "m", "messages": [{"role": "user", "content": 5}]})",
                          R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                          R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"}) {
    ApiError e;
    EXPECT_FALSE(parse_chat_request(bad, &e).has_value()) << bad;
    EXPECT_EQ(e.status, 400);
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(OpenAiParse, TritonGenerate) {
  ApiError err;
  auto r = parse_generate_request(R"({"text_input": "hi", "parameters": {"max_tokens": 4, "temperature": 0}})",
                                  "llama", &err);
  ASSERT_TRUE(r.has_value()) << err.message;
  EXPECT_EQ(r->model, "llama");
  EXPECT_EQ(r->prompts[0].text, "hi");
  EXPECT_EQ(r->max_tokens, 4);
  EXPECT_EQ(r->temperature, 0.0);
  auto top = parse_generate_request(R"({"text_input": "hi", "max_tokens": 2, "stop": ["x"]})", "m", &err);
  ASSERT_TRUE(top.has_value()) << err.message;
  EXPECT_EQ(top->max_tokens, 2);
  EXPECT_EQ(top->stop, (std::vector<std::string>{"x"}));
  ApiError e;
  EXPECT_FALSE(parse_generate_request(R"({"parameters": {}})", "m", &e).has_value());
  EXPECT_EQ(e.param, "text_input");
}

TEST(OpenAiShapes, ErrorBody) {
  auto e = make_error(404, "The model `x` does not exist.", "model");
  json j = json::parse(error_json(e));
  EXPECT_EQ(j["error"]["message"], "The model `x` does not exist.");
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  json k = json::parse(error_json(make_error(400, "bad")));
  EXPECT_EQ(k["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
  EXPECT_EQ(error_response(make_error(429, "full")).status, 429);
}

}  // namespace
}  // namespace gpuopt::server::openai

namespace gpuopt::server::openai {
namespace {

// A tokenizer whose every id decodes to "<id>" (the shapes need token text only).
class IdTokenizer : public llm::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(const std::vector<int64_t>& ids, bool) const override {
    std::string s;
    for (int64_t i : ids) {
      s.push_back('<');
      s += std::to_string(i);
      s.push_back('>');
    }
    return s;
  }
  int64_t vocab_size() const override { return 100; }
  std::optional<int64_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::optional<std::string> id_to_token(int64_t) const override { return std::nullopt; }
  bool is_special(int64_t) const override { return false; }
};

TEST(OpenAiShapes, CompletionAndChatBodies) {
  IdTokenizer tok;
  ResponseMeta m{.id = "cmpl-1", .created = 7, .model = "tiny", .endpoint = Endpoint::kCompletions, .logprobs = true};
  Choice c;
  c.index = 0;
  c.text = "<3><4>";
  c.finish_reason = "length";
  c.tokens = {{.token = 3, .logprob = -0.5f, .top = {{3, -0.5f}, {9, -1.5f}}}, {.token = 4, .logprob = -0.25f, .top = {}}};
  Usage u{.prompt_tokens = 5, .completion_tokens = 2, .cached_tokens = 0};
  json j = json::parse(completion_json(m, tok, {c}, u));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 7);
  EXPECT_EQ(j["choices"][0]["text"], "<3><4>");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], json({"<3>", "<4>"}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], json({0, 3}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0]["<9>"], -1.5);
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 5}, {"completion_tokens", 2}, {"total_tokens", 7}}));
  m.endpoint = Endpoint::kChat;
  m.id = "chatcmpl-1";
  json k = json::parse(completion_json(m, tok, {c}, u));
  EXPECT_EQ(k["object"], "chat.completion");
  EXPECT_EQ(k["choices"][0]["message"], json({{"role", "assistant"}, {"content", "<3><4>"}}));
  EXPECT_EQ(k["choices"][0]["logprobs"]["content"][0]["token"], "<3>");
  EXPECT_EQ(k["choices"][0]["logprobs"]["content"][0]["bytes"], json({60, 51, 62}));
  EXPECT_EQ(k["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], "<9>");
}

TEST(OpenAiShapes, StreamChunks) {
  IdTokenizer tok;
  ResponseMeta m{.id = "chatcmpl-2", .created = 1, .model = "tiny", .endpoint = Endpoint::kChat, .logprobs = false};
  auto parse_event = [](const std::string& e) {
    EXPECT_EQ(e.rfind("data: ", 0), 0u);
    EXPECT_TRUE(e.size() > 8 && e[e.size() - 1] == '\n' && e[e.size() - 2] == '\n');
    return json::parse(e.begin() + 6, e.end());
  };
  json first = parse_event(chunk_event(m, tok, 0, "", {}, 0, "", true, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  json last = parse_event(chunk_event(m, tok, 1, "", {}, 0, "stop", false, false));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["index"], 1);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  json usage = parse_event(usage_event(m, Usage{.prompt_tokens = 2, .completion_tokens = 3, .cached_tokens = 1}));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
  EXPECT_EQ(std::string(kDoneEvent), "data: [DONE]\n\n");
  json g = parse_event(generate_event("tiny", "hi", "length"));
  EXPECT_EQ(g, json({{"model_name", "tiny"}, {"model_version", "1"}, {"text_output", "hi"}, {"finish_reason", "length"}}));
}

// The streamed chunk is written without a JSON tree (it is built per token): byte for byte what
// nlohmann's ordered tree gives, escaping included (quotes, control characters, invalid UTF-8).
TEST(OpenAiShapes, StreamChunkBytesEqualTheJsonTree) {
  IdTokenizer tok;
  using oj = nlohmann::ordered_json;
  auto tree = [](const ResponseMeta& m, int index, const std::string& text, const char* fr, bool role, bool usage) {
    oj choice;
    oj frj = fr[0] ? oj(fr) : oj(nullptr);
    if (m.endpoint == Endpoint::kChat) {
      oj delta = oj::object();
      if (role) delta["role"] = "assistant";
      if (role || !text.empty()) delta["content"] = text;
      choice = {{"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", frj}};
    } else {
      choice = {{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", frj}};
    }
    oj j = {{"id", m.id},
            {"object", m.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", m.created},
            {"model", m.model},
            {"choices", oj::array({choice})}};
    if (usage) j["usage"] = nullptr;
    return "data: " + j.dump(-1, ' ', false, oj::error_handler_t::replace) + "\n\n";
  };
  const std::string texts[] = {"", "hello", "quote \" back \\ nl \n tab \t ctl \x01", "bad \xff utf8 \xe2\x82", "\xc3\xa9t\xc3\xa9"};
  for (Endpoint e : {Endpoint::kChat, Endpoint::kCompletions})
    for (const std::string& t : texts)
      for (const char* fr : {"", "stop", "length"})
        for (bool role : {false, true})
          for (bool usage : {false, true}) {
            ResponseMeta m{.id = "cmpl-\"x", .created = 1732800000, .model = "we\"ird\\m", .endpoint = e,
                           .logprobs = false};
            EXPECT_EQ(chunk_event(m, tok, 3, t, {}, 0, fr, role, usage), tree(m, 3, t, fr, role && e == Endpoint::kChat, usage))
                << t << " " << fr << " " << role << " " << usage;
          }
}

}  // namespace
}  // namespace gpuopt::server::openai
