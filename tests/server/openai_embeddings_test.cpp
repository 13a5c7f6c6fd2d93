// /v1/embeddings' parts below the model (server/openai/embeddings.h): the pooling read from a
// folder (embedding.json, sentence-transformers' files, the defaults, and the errors), pool()
// against the definitions recomputed here in double, and the route on a real HttpServer with an
// Embedder whose vectors the test computes itself (OpenAI's shapes, base64, usage, errors).
// The models themselves are checked against ONNX Runtime and numpy in
// tests/python/test_llm_embeddings.py.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "server/openai/embeddings.h"

namespace gpuopt::server::openai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct TempDir {
  fs::path p;
  TempDir() {
    p = fs::temp_directory_path() / fmt::format("gpuopt-emb-{}-{}", ::getpid(), counter()++);
    fs::create_directories(p);
  }
  ~TempDir() { fs::remove_all(p); }
  static int& counter() {
    static int n = 0;
    return n;
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((p / rel).parent_path());
    std::ofstream(p / rel) << text;
  }
};

TEST(EmbeddingPooling, FolderConfig) {
  {
    TempDir d;  // nothing: mean + normalise (encoders), last + normalise (decoders)
    auto e = read_pooling_config(d.p, false);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->pooling, Pooling::kMean);
    EXPECT_TRUE(e->normalize);
    EXPECT_EQ(read_pooling_config(d.p, true)->pooling, Pooling::kLast);
  }
  {
    TempDir d;
    d.write("1_Pooling/config.json", R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})");
    auto e = read_pooling_config(d.p, false);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e->pooling, Pooling::kCls);
    EXPECT_FALSE(e->normalize);  // no Normalize module
    d.write("modules.json", R"([{"type": "sentence_transformers.models.Transformer"},
                               {"type": "sentence_transformers.models.Normalize"}])");
    EXPECT_TRUE(read_pooling_config(d.p, false)->normalize);
    d.write("embedding.json", R"({"pooling": "max", "normalize": false})");  // gpuopt's file wins
    e = read_pooling_config(d.p, false);
    EXPECT_EQ(e->pooling, Pooling::kMax);
    EXPECT_FALSE(e->normalize);
  }
  auto refused = [](const std::string& rel, const std::string& text, const std::string& want) {
    TempDir d;
    d.write(rel, text);
    auto e = read_pooling_config(d.p, false);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.status().message().find(want), std::string::npos) << e.status().message();
    EXPECT_NE(e.status().message().find(rel.substr(0, rel.find('/'))), std::string::npos) << e.status().message();
  };
  refused("1_Pooling/config.json", R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})", "found 2");
  refused("1_Pooling/config.json", R"({"pooling_mode_weightedmean_tokens": true})", "weightedmean");
  refused("embedding.json", R"({"pooling": "median"})", "median");
  refused("embedding.json", R"({"normalize": "yes"})", "normalize");
  refused("embedding.json", "{not json", "not valid JSON");
}

TEST(EmbeddingPooling, PoolMatchesTheDefinitions) {
  const int64_t T = 4, D = 3;
  std::vector<float> h(T * D);
  for (int64_t i = 0; i < T * D; ++i) h[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 3);
  const std::vector<int64_t> mask = {1, 1, 1, 0};  // the last row is padding
  auto row = [&](int64_t t, int64_t d) { return static_cast<double>(h[t * D + d]); };
  auto check = [&](Pooling p, bool norm, auto want_of) {
    std::vector<double> want(D);
    for (int64_t d = 0; d < D; ++d) want[d] = want_of(d);
    if (norm) {
      double n = 0;
      for (double v : want) n += v * v;
      for (double& v : want) v /= std::sqrt(n);
    }
    const auto got = pool(h.data(), T, D, mask, PoolingConfig{p, norm});
    ASSERT_EQ(got.size(), static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(got[d], want[d], 1e-6) << pooling_name(p) << " " << d;
  };
  for (bool norm : {false, true}) {
    check(Pooling::kMean, norm, [&](int64_t d) { return (row(0, d) + row(1, d) + row(2, d)) / 3; });
    check(Pooling::kCls, norm, [&](int64_t d) { return row(0, d); });
    check(Pooling::kLast, norm, [&](int64_t d) { return row(2, d); });  // the last real token
    check(Pooling::kMax, norm, [&](int64_t d) { return std::max({row(0, d), row(1, d), row(2, d)}); });
  }
}

// An embedder whose vector for ids is (len, sum, first id): easy to recompute.
class CountingEmbedder : public Embedder {
 public:
  CountingEmbedder() {
    auto t = llm::Tokenizer::from_json(R"({"version": "1.0", "added_tokens": [], "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "post_processor": null, "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3}, "merges": []}})",
                                       "test tokenizer");
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    tok_ = std::move(t).value();
  }
  const llm::Tokenizer& tokenizer() const override { return *tok_; }
  int64_t max_input_tokens() const override { return 6; }
  int64_t dimensions() const override { return 3; }
  const PoolingConfig& pooling() const override { return cfg_; }
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int64_t>>& inputs) override {
    std::vector<std::vector<float>> out;
    for (const auto& x : inputs) {
      float sum = 0;
      for (int64_t id : x) sum += static_cast<float>(id);
      if (x[0] == 2 && x.size() == 6) return Status::Internal("the model failed");
      out.push_back({static_cast<float>(x.size()), sum, static_cast<float>(x[0])});
    }
    return out;
  }

 private:
  std::unique_ptr<llm::Tokenizer> tok_;
  PoolingConfig cfg_;
};

struct RouteFixture {
  std::unique_ptr<net::HttpServer> server;
  std::unique_ptr<net::HttpClient> client;
  RouteFixture() {
    auto e = std::make_shared<CountingEmbedder>();
    net::Router r;
    add_embedding_routes(
        r, [e](std::string_view m) -> std::shared_ptr<Embedder> { return m == "count" ? e : nullptr; }, 3);
    net::ServerOptions o;
    o.host = "127.0.0.1";
    o.threads = 2;
    auto s = net::HttpServer::start(o, std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    server = std::move(s).value();
    client = std::make_unique<net::HttpClient>("127.0.0.1", server->port());
  }
  std::pair<int, json> post(const json& body) {
    auto r = client->post("/v1/embeddings", body.dump());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return {r->status, json::parse(r->body)};
  }
};

TEST(EmbeddingRoute, ShapesOfInputAndOutput) {
  RouteFixture f;
  auto [code, j] = f.post({{"model", "count"}, {"input", "abc"}});
  ASSERT_EQ(code, 200) << j.dump();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "count");
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  EXPECT_EQ(j["data"][0]["embedding"], json({3.0, 3.0, 0.0}));  // a b c: ids 0 1 2
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 3);
  std::tie(code, j) = f.post({{"model", "count"}, {"input", {{1, 1}, {2}}}});
  ASSERT_EQ(code, 200) << j.dump();
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"], json({2.0, 2.0, 1.0}));
  EXPECT_EQ(j["data"][1]["embedding"], json({1.0, 2.0, 2.0}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  // base64: little-endian f32 bytes of the same vector.
  std::tie(code, j) = f.post({{"model", "count"}, {"input", {1, 2}}, {"encoding_format", "base64"}});
  ASSERT_EQ(code, 200) << j.dump();
  const std::string b64 = j["data"][0]["embedding"];
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  for (size_t i = 0; i + 4 <= b64.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = b64[i + k];
      v = (v << 6) | (c == '=' ? (++pad, 0u) : static_cast<uint32_t>(alphabet.find(c)));
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += static_cast<char>((v >> (16 - 8 * k)) & 0xff);
  }
  ASSERT_EQ(bytes.size(), 12u);
  float got[3];
  std::memcpy(got, bytes.data(), 12);
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_EQ(got[1], 3.0f);
  EXPECT_EQ(got[2], 1.0f);
}

TEST(EmbeddingRoute, ErrorsInOpenAIsBody) {
  RouteFixture f;
  const std::vector<std::tuple<json, int, std::string>> cases = {
      {{{"model", "count"}, {"input", "a"}, {"dimensions", 2}}, 400, "dimensions"},
      {{{"model", "other"}, {"input", "a"}}, 404, "other"},
      {{{"model", "count"}, {"input", {"a", "b", "c", "a"}}}, 400, "4 items, more than 3"},
      {{{"model", "count"}, {"input", "abcabca"}}, 400, "maximum context of 6"},
      {{{"model", "count"}, {"input", {7}}}, 400, "token id 7"},
      {{{"model", "count"}, {"input", {{1}, json::array()}}}, 400, "input[1]"},
      {{{"model", "count"}, {"input", 5}}, 400, "input"},
      {{{"model", 5}, {"input", "a"}}, 400, "model"},
      {{{"model", "count"}, {"input", {2, 2, 2, 2, 2, 2}}}, 500, "the model failed"},
  };
  for (const auto& [body, want_code, want] : cases) {
    auto [code, j] = f.post(body);
    EXPECT_EQ(code, want_code) << body.dump() << " -> " << j.dump();
    const std::string msg = j["error"]["message"];
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_EQ(j["error"]["type"], want_code >= 500 ? "server_error" : "invalid_request_error");
  }
  auto r = f.client->post("/v1/embeddings", "[1, 2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
}

}  // namespace
}  // namespace gpuopt::server::openai
