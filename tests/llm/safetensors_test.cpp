// The safetensors reader and the checkpoint loader: valid files (single and sharded) load, and
// every way a file can lie (truncation, offsets, byte counts, overlap, dtype, shape, missing shard)
// is refused with the file and tensor named.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "llm/checkpoint.h"
#include "llm/safetensors.h"

namespace gpuopt::llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<float> values;  // written as F32, or F16 when dtype says so
};

void write_raw(const fs::path& p, const std::string& header, const std::string& data) {
  std::ofstream f(p, std::ios::binary);
  uint64_t n = header.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  f.write(len, 8);
  f << header << data;
}

void write_st(const fs::path& p, const std::vector<Entry>& entries) {
  json h = json::object();
  std::string data;
  for (const Entry& e : entries) {
    const size_t begin = data.size();
    for (float v : e.values) {
      if (e.dtype == "F16") {
        const uint16_t b = Half::from_float(v);
        data.append(reinterpret_cast<const char*>(&b), 2);
      } else {
        data.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {begin, data.size()}}};
  }
  h["__metadata__"] = {{"format", "pt"}};
  write_raw(p, h.dump(), data);
}

class Tmp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("gpuopt_st_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

using Safetensors = Tmp;

TEST_F(Safetensors, ReadsTensorsAndValues) {
  write_st(dir_ / "a.safetensors", {{"w", "F32", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", "F16", {2}, {0.5f, -2}}});
  auto f = SafetensorsFile::open(dir_ / "a.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const WeightView* w = (*f)->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::F32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->bytes, 24u);
  float v[6];
  std::memcpy(v, w->data, 24);
  EXPECT_EQ(v[5], 6.0f);
  const WeightView* b = (*f)->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::F16);
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(b->data) + 2, 2);
  EXPECT_EQ(Half::to_float(h), -2.0f);
  EXPECT_EQ((*f)->find("c"), nullptr);
}

void expect_bad(const fs::path& p, const std::string& needle) {
  auto f = SafetensorsFile::open(p);
  ASSERT_FALSE(f.ok()) << needle;
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().to_string();
  EXPECT_NE(f.status().message().find(p.string()), std::string::npos) << f.status().to_string();
  EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
}

TEST_F(Safetensors, RefusesLies) {
  const fs::path p = dir_ / "bad.safetensors";
  std::ofstream(p, std::ios::binary) << "abc";
  expect_bad(p, "too short");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(8, 0));
  fs::resize_file(p, fs::file_size(p) - 20);  // cut into the header
  expect_bad(p, "truncated");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", std::string(8, 0));
  expect_bad(p, "tensor 'w': data_offsets [0, 16] lie outside the file's 8 data bytes");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, 0));
  expect_bad(p, "tensor 'w': data_offsets [0, 8] hold 8 bytes, but F32 [3] needs 12");
  write_raw(p, R"({"w": {"dtype": "F16", "shape": [4], "data_offsets": [8, 0]}})", std::string(8, 0));
  expect_bad(p, "tensor 'w': data_offsets [8, 0]");
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            std::string(12, 0));
  expect_bad(p, "tensors 'a' and 'b' overlap");
  write_raw(p, R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}})", std::string(8, 0));
  expect_bad(p, "tensor 'w': unknown dtype \"Q4\"");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", std::string(8, 0));
  expect_bad(p, "not a list of sizes");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
            std::string(8, 0));
  expect_bad(p, "too large");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [2]}})", std::string(8, 0));
  expect_bad(p, "needs dtype, shape and data_offsets");
  write_raw(p, "[1, 2]", "");
  expect_bad(p, "not a JSON object");
  // A header length far past the end of the file.
  {
    std::ofstream f(p, std::ios::binary);
    const uint64_t n = 1ull << 40;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  expect_bad(p, "truncated");
  auto missing = SafetensorsFile::open(dir_ / "nope.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// A one-layer Llama small enough to write by hand.
LlmConfig tiny_config(bool tie = false) {
  std::string j = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 6, "hidden_size": 4,
    "intermediate_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1)";
  j += tie ? R"(, "tie_word_embeddings": true})" : "}";
  return parse_llm_config(j, "config.json").value();
}

std::vector<Entry> entries_for(const LlmConfig& c, const std::string& dtype = "F32") {
  std::vector<Entry> out;
  float k = 0;
  for (const auto& [name, shape] : expected_weights(c)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = (k += 0.25f);
    out.push_back({name, dtype, shape, v});
  }
  return out;
}

using Checkpoints = Tmp;

TEST_F(Checkpoints, OpensSingleFile) {
  const LlmConfig c = tiny_config();
  write_st(dir_ / "model.safetensors", entries_for(c, "F16"));
  auto ck = open_checkpoint(dir_, c);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  EXPECT_EQ((*ck)->tensors().size(), expected_weights(c).size());
  const WeightView* w = (*ck)->find("lm_head.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::F16);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{6, 4}));
  EXPECT_GT((*ck)->total_bytes(), 0u);
}

TEST_F(Checkpoints, OpensShardsThroughTheIndex) {
  const LlmConfig c = tiny_config(/*tie=*/true);
  auto all = entries_for(c);
  std::vector<Entry> a(all.begin(), all.begin() + 4), b(all.begin() + 4, all.end());
  write_st(dir_ / "model-00001-of-00002.safetensors", a);
  write_st(dir_ / "model-00002-of-00002.safetensors", b);
  json idx = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const Entry& e : a) idx["weight_map"][e.name] = "model-00001-of-00002.safetensors";
  for (const Entry& e : b) idx["weight_map"][e.name] = "model-00002-of-00002.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  std::vector<std::pair<size_t, size_t>> progress;
  auto ck = open_checkpoint(dir_, c, [&](size_t d, size_t t) { progress.push_back({d, t}); });
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  EXPECT_EQ((*ck)->find("lm_head.weight"), nullptr);  // tied
  ASSERT_NE((*ck)->find("model.norm.weight"), nullptr);
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress.back().first, progress.back().second);

  // The same index, one shard gone.
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  auto gone = open_checkpoint(dir_, c);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("model-00002-of-00002.safetensors"), std::string::npos)
      << gone.status().to_string();
  EXPECT_NE(gone.status().message().find("does not exist"), std::string::npos);

  // A shard name that leaves the folder.
  idx["weight_map"]["model.norm.weight"] = "../x.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  auto escape = open_checkpoint(dir_, c);
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("model.norm.weight"), std::string::npos) << escape.status().to_string();
}

void expect_open_fails(const fs::path& dir, const LlmConfig& c, const std::string& needle) {
  auto ck = open_checkpoint(dir, c);
  ASSERT_FALSE(ck.ok()) << needle;
  EXPECT_NE(ck.status().message().find(needle), std::string::npos) << ck.status().to_string();
}

TEST_F(Checkpoints, RefusesWhatTheConfigDoesNotFit) {
  const LlmConfig c = tiny_config();
  expect_open_fails(dir_, c, "has neither model.safetensors nor model.safetensors.index.json");
  auto e = entries_for(c);
  e.erase(e.begin() + 3);  // a layer-0 projection
  write_st(dir_ / "model.safetensors", e);
  expect_open_fails(dir_, c, "tensor 'model.layers.0.self_attn.k_proj.weight' is missing");
  e = entries_for(c);
  e[1].shape = {2, 2};  // input_layernorm [4] -> [2, 2]
  write_st(dir_ / "model.safetensors", e);
  expect_open_fails(dir_, c, "tensor 'model.layers.0.input_layernorm.weight' has shape [2, 2], the config needs [4]");
  e = entries_for(c);
  e[0].dtype = "I32";  // embed_tokens as int32
  write_st(dir_ / "model.safetensors", e);
  expect_open_fails(dir_, c, "tensor 'model.embed_tokens.weight' has dtype i32");
  json idx = {{"weight_map", {{"model.embed_tokens.weight", "model.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  expect_open_fails(dir_, c, "'model.layers.0.input_layernorm.weight' is not in the weight_map");
}

TEST(RandomCheckpoint, SeededAndComplete) {
  const LlmConfig c = tiny_config();
  auto a = random_checkpoint(c, DType::F32, 7), b = random_checkpoint(c, DType::F32, 7),
       d = random_checkpoint(c, DType::F32, 8);
  ASSERT_EQ(a->tensors().size(), expected_weights(c).size());
  const WeightView* qa = a->find("model.layers.0.self_attn.q_proj.weight");
  const WeightView* qb = b->find("model.layers.0.self_attn.q_proj.weight");
  const WeightView* qd = d->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(qa && qb && qd);
  EXPECT_EQ(std::memcmp(qa->data, qb->data, qa->bytes), 0);
  EXPECT_NE(std::memcmp(qa->data, qd->data, qa->bytes), 0);
  float norm;
  std::memcpy(&norm, a->find("model.norm.weight")->data, 4);
  EXPECT_EQ(norm, 1.0f);
  auto h = random_checkpoint(c, DType::BF16, 7);
  EXPECT_EQ(h->find("lm_head.weight")->bytes, 6u * 4 * 2);
  EXPECT_EQ(h->find("lm_head.weight")->dtype, DType::BF16);
}

}  // namespace
}  // namespace gpuopt::llm
