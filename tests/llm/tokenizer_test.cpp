// src/llm/tokenizer.h on hand-built tokenizer.json files whose ids follow from the BPE and WordPiece
// algorithms by hand (the Python tests, tests/python/test_llm_tokenizer.py and test_llm_wordpiece.py,
// compare trained files with the `tokenizers` library); the streaming decoder; malformed files.
#include "llm/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>

namespace gpuopt::llm {
namespace {

using json = nlohmann::json;

std::unique_ptr<Tokenizer> load(const json& j) {
  auto t = Tokenizer::from_json(j.dump(), "test.json");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

// GPT-2's byte -> printable character table (bytes_to_unicode), as UTF-8.
std::string byte_char(int b) {
  bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int k = 0; k < b; ++k) {
      if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

json byte_level(json vocab, json merges) {
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merges}}}};
}

// Every byte is a token whose id is the byte's value.
json all_bytes_vocab() {
  json v = json::object();
  for (int b = 0; b < 256; ++b) v[byte_char(b)] = b;
  return v;
}

TEST(Tokenizer, ByteLevelMergesByRank) {
  // "b c" (rank 0) beats "a b" (rank 1); then "a bc" (rank 2) applies; "Ġ a" (rank 3) comes too late.
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"Ġ", 3}, {"ab", 4}, {"bc", 5}, {"abc", 6}, {"Ġa", 7}};
  auto pair = [](const char* a, const char* b) { return json::array({a, b}); };
  for (json merges : {json::array({"b c", "a b", "a bc", "Ġ a"}),  // both merge formats
                      json::array({pair("b", "c"), pair("a", "b"), pair("a", "bc"), pair("Ġ", "a")})}) {
    auto t = load(byte_level(vocab, merges));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", true), (std::vector<int64_t>{6}));
    EXPECT_EQ(t->encode("ab", true), (std::vector<int64_t>{4}));
    EXPECT_EQ(t->encode(" abc", true), (std::vector<int64_t>{3, 6}));
    EXPECT_EQ(t->encode("abab", true), (std::vector<int64_t>{4, 4}));
    EXPECT_EQ(t->encode("cab", true), (std::vector<int64_t>{2, 4}));
    EXPECT_EQ(t->encode(" a", true), (std::vector<int64_t>{7}));
    EXPECT_EQ(t->decode({3, 6, 7, 4}, false), " abc aab");
    EXPECT_EQ(t->vocab_size(), 8);
    EXPECT_EQ(t->token_to_id("abc"), 6);
    EXPECT_EQ(t->id_to_token(7), "Ġa");
    EXPECT_FALSE(t->id_to_token(8));
  }
}

TEST(Tokenizer, LeftmostMergeFirstAmongEqualRanks) {
  // "aaa" with the one merge "a a": the leftmost pair merges first -> "aa" "a".
  auto t = load(byte_level({{"a", 0}, {"aa", 1}}, {"a a"}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("aaa", false), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(t->encode("aaaa", false), (std::vector<int64_t>{1, 1}));
}

json sentencepiece(bool legacy) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<0xC3>", 3}, {"<0xA9>", 4},
                {"▁", 5},     {"h", 6},   {"i", 7},    {"▁h", 8},     {"▁hi", 9}};
  json added = json::array();
  for (auto [c, id] : {std::pair{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}}) {
    added.push_back({{"id", id},
                     {"content", c},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json j = {{"version", "1.0"},
            {"added_tokens", added},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single",
               {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
            {"decoder",
             {{"type", "Sequence"},
              {"decoders",
               {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                {{"type", "ByteFallback"}},
                {{"type", "Fuse"}},
                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
            {"model",
             {{"type", "BPE"},
              {"unk_token", "<unk>"},
              {"fuse_unk", true},
              {"byte_fallback", true},
              {"vocab", vocab},
              {"merges", {"▁ h", "▁h i"}}}}};
  if (legacy) {  // Llama-2's original form: the normalizer does what Metaspace does
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", "▁"}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
    j["pre_tokenizer"] = nullptr;
  } else {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  }
  return j;
}

TEST(Tokenizer, SentencePieceByteFallbackAndUnk) {
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy normalizer" : "Metaspace");
    auto t = load(sentencepiece(legacy));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("hi", true), (std::vector<int64_t>{1, 9}));
    EXPECT_EQ(t->encode("hi", false), (std::vector<int64_t>{9}));
    // é is not a token, its bytes C3 A9 are; € (E2 82 AC) has no byte tokens: <unk>, two fused.
    EXPECT_EQ(t->encode("hié", false), (std::vector<int64_t>{9, 3, 4}));
    EXPECT_EQ(t->encode("h€€i", false), (std::vector<int64_t>{8, 0, 7}));
    EXPECT_EQ(t->encode("", true), (std::vector<int64_t>{1}));
    // Special tokens are matched first; "first" prepends ▁ only at the start of the text.
    // The legacy normalizer prepends to every piece; Metaspace's "first" only at the text's start.
    EXPECT_EQ(t->encode("<s>hi", false), legacy ? (std::vector<int64_t>{1, 9}) : (std::vector<int64_t>{1, 6, 7}));
    EXPECT_EQ(t->decode({1, 9, 3, 4}, true), "hié");
    EXPECT_EQ(t->decode({1, 9, 3, 4}, false), "<s> hié");
    EXPECT_EQ(t->decode({9, 3}, true), "hi\xEF\xBF\xBD");  // a lone byte: U+FFFD per byte
    EXPECT_TRUE(t->is_special(1));
    EXPECT_FALSE(t->is_special(9));
  }
}

TEST(Tokenizer, AddedTokenFlags) {
  json j = byte_level(all_bytes_vocab(), json::array());
  auto with = [&](bool lstrip, bool rstrip, bool single_word) {
    json k = j;
    k["added_tokens"] = {{{"id", 300},
                          {"content", "<m>"},
                          {"single_word", single_word},
                          {"lstrip", lstrip},
                          {"rstrip", rstrip},
                          {"normalized", false},
                          {"special", true}}};
    return load(k);
  };
  // 'a' = 97, ' ' = 32 (Ġ), 'b' = 98, '<' 60, 'm' 109, '>' 62.
  EXPECT_EQ(with(false, false, false)->encode("a <m> b", false), (std::vector<int64_t>{97, 32, 300, 32, 98}));
  EXPECT_EQ(with(true, false, false)->encode("a <m> b", false), (std::vector<int64_t>{97, 300, 32, 98}));
  EXPECT_EQ(with(false, true, false)->encode("a <m> b", false), (std::vector<int64_t>{97, 32, 300, 98}));
  EXPECT_EQ(with(false, false, true)->encode("a<m>b", false), (std::vector<int64_t>{97, 60, 109, 62, 98}));
  EXPECT_EQ(with(false, false, true)->encode("a <m> b", false), (std::vector<int64_t>{97, 32, 300, 32, 98}));
  auto t = with(false, false, false);
  EXPECT_EQ(t->decode({97, 300, 98}, false), "a<m>b");
  EXPECT_EQ(t->decode({97, 300, 98}, true), "ab");
  EXPECT_EQ(t->vocab_size(), 301);
}

TEST(Tokenizer, InvalidUtf8IsEncodedAsBytes) {
  auto t = load(byte_level(all_bytes_vocab(), json::array()));
  ASSERT_TRUE(t);
  std::string text = "\xFF\xFE a\xC3 b\xE2\x82 \xF0\x9F\x98";
  std::vector<int64_t> want;
  for (unsigned char c : text) want.push_back(c);
  EXPECT_EQ(t->encode(text, true), want);
  auto sp = load(sentencepiece(false));
  ASSERT_TRUE(sp);
  EXPECT_EQ(sp->encode("h\xC3", false), (std::vector<int64_t>{8, 3}));          // the byte's own token
  EXPECT_EQ(sp->encode("h\xFF\xFEi", false), (std::vector<int64_t>{8, 0, 7}));  // no <0xFF>: one fused unk
}

std::string stream(const Tokenizer& t, const std::vector<int64_t>& ids, bool skip, std::vector<std::string>* pieces) {
  IncrementalDecoder dec(t, skip);
  std::string all;
  for (int64_t id : ids) {
    std::string p = dec.push(id);
    if (pieces) pieces->push_back(p);
    all += p;
  }
  std::string last = dec.flush();
  if (pieces) pieces->push_back(last);
  return all + last;
}

TEST(IncrementalDecoder, NeverEmitsHalfACharacter) {
  auto t = load(byte_level(all_bytes_vocab(), json::array()));
  ASSERT_TRUE(t);
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\x96\xE7\x95\x8C!";  // héllo 😀 世界!
  std::vector<int64_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  std::vector<std::string> pieces;
  EXPECT_EQ(stream(*t, ids, true, &pieces), text);
  for (const auto& p : pieces) EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos) << p;
  // The pieces as they come: one character each, the multi-byte ones once complete.
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "\xC3\xA9");
  EXPECT_EQ(pieces[7], "");
  EXPECT_EQ(pieces[10], "\xF0\x9F\x98\x80");
  // A truncated character at the end comes out of flush() as decode() has it.
  std::vector<int64_t> cut(ids.begin(), ids.begin() + 9);
  EXPECT_EQ(stream(*t, cut, true, nullptr), t->decode(cut, true));
}

TEST(IncrementalDecoder, MetaspaceLeadingSpace) {
  auto t = load(sentencepiece(false));
  ASSERT_TRUE(t);
  std::vector<int64_t> ids = {1, 9, 5, 8, 3, 4, 9};  // <s> ▁hi ▁ ▁h é ▁hi
  std::vector<std::string> pieces;
  EXPECT_EQ(stream(*t, ids, true, &pieces), t->decode(ids, true));
  EXPECT_EQ(pieces[1], "hi");  // the first word has no leading space, as in decode()
  EXPECT_EQ(stream(*t, ids, false, nullptr), t->decode(ids, false));
  // Random ids (10 is no token at all; é's two byte tokens only together): the pieces add up
  // to decode().
  std::mt19937 rng(7);
  for (int k = 0; k < 200; ++k) {
    std::vector<int64_t> r;
    for (size_t n = rng() % 12; r.size() < n;) {
      int64_t id = rng() % 11;
      if (id == 3 || id == 4)
        r.insert(r.end(), {3, 4});
      else
        r.push_back(id);
    }
    EXPECT_EQ(stream(*t, r, k % 2, nullptr), t->decode(r, k % 2));
  }
  // Byte tokens that are no UTF-8: decode() turns the whole run into U+FFFDs, after "é" went out;
  // the stream keeps what it emitted, then the U+FFFDs, and goes on with what follows.
  std::string s = stream(*t, {9, 3, 4, 4, 9}, true, nullptr);
  EXPECT_EQ(t->decode({9, 3, 4, 4, 9}, true), "hi\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD hi");
  EXPECT_EQ(s.substr(0, 4), "hi\xC3\xA9");
  EXPECT_TRUE(s.ends_with(" hi")) << s;
}

void expect_error(const std::string& text, const std::string& needle) {
  auto t = Tokenizer::from_json(text, "models/tok.json");
  ASSERT_FALSE(t.ok()) << text;
  const std::string msg = t.status().to_string();
  EXPECT_NE(msg.find("models/tok.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Tokenizer, MalformedFilesAreRefusedByName) {
  json ok = byte_level({{"a", 0}, {"b", 1}, {"ab", 2}}, {"a b"});
  expect_error("{ \"model\": ", "invalid JSON");
  expect_error("[1, 2]", "not a JSON object");
  json j = ok;
  j.erase("model");
  expect_error(j.dump(), "no \"model\"");
  for (const char* type : {"Unigram", "WordLevel"}) {
    j = ok;
    j["model"]["type"] = type;
    expect_error(j.dump(), type);
  }
  j = ok;
  j["model"]["merges"] = {"a c"};
  expect_error(j.dump(), "'c' is not in the vocab");
  j = ok;
  j["model"]["merges"] = {"ab"};
  expect_error(j.dump(), "is not 'a b'");
  j = ok;
  j["model"]["vocab"]["x"] = -3;
  expect_error(j.dump(), "model.vocab['x']");
  j = ok;
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_error(j.dump(), "normalizer type 'Precompiled' is not supported");
  j = ok;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_error(j.dump(), "pre_tokenizer.pattern");
  j = ok;
  j["decoder"] = {{"type", "CTC"}};
  expect_error(j.dump(), "decoder type 'CTC'");
  j = ok;
  j["model"]["dropout"] = 0.1;
  expect_error(j.dump(), "dropout");
  json deep = {{"type", "Lowercase"}};
  for (int k = 0; k < 1000; ++k) deep = {{"type", "Sequence"}, {"normalizers", json::array({deep})}};
  j = ok;
  j["normalizer"] = deep;
  expect_error(j.dump(), "nested more than 16 deep");

  auto missing = Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().to_string().find("/nonexistent/tokenizer.json"), std::string::npos);
}

json wordpiece(json normalizer) {
  json vocab = {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"un", 3}, {"##aff", 4}, {"##able", 5},
                {"a", 6},     {"##a", 7},   {"##ff", 8},  {"!", 9},  {"cafe", 10}, {"\xE4\xB8\x80", 11},
                {"x", 12},    {"##y", 13}};
  return {
      {"normalizer", normalizer},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"added_tokens",
       {{{"id", 1}, {"content", "[CLS]"}, {"special", true}}, {{"id", 2}, {"content", "[SEP]"}, {"special", true}}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 5},
        {"vocab", vocab}}}};
}

// Greedy longest match first: "unaffable" is un + ##aff + ##able (not un + ##a + ##ff + ...); a
// word with a piece nothing matches, or longer than max_input_chars_per_word, is one [UNK].
TEST(Tokenizer, WordPiece) {
  json bert = {{"type", "BertNormalizer"},
               {"clean_text", true},
               {"handle_chinese_chars", true},
               {"strip_accents", nullptr},
               {"lowercase", true}};
  auto t = load(wordpiece(bert));
  ASSERT_TRUE(t);
  using V = std::vector<int64_t>;
  EXPECT_EQ(t->encode("unaff", false), (V{3, 4}));
  // max_input_chars_per_word is 5 here: "unaffable" (9 characters) is unknown; so is "unx" (no "##x").
  EXPECT_EQ(t->encode("unaff  aaa!", true), (V{1, 3, 4, 6, 7, 7, 9, 2}));
  EXPECT_EQ(t->encode("unaffable unx UNAFF", false), (V{0, 0, 3, 4}));
  // Accents stripped (strip_accents null follows lowercase), CJK isolated, controls dropped.
  EXPECT_EQ(t->encode("CAF\xC3\x89\xE4\xB8\x80x\x07y", false), (V{10, 11, 12, 13}));
  EXPECT_EQ(t->decode({1, 3, 4, 6, 7, 9, 2}, true), "unaff aa!");
  EXPECT_EQ(t->decode({1, 3, 4, 2}, false), "[CLS] unaff [SEP]");
  // Cased: "UNAFF" stays unknown; without lowercase, accents stay (strip_accents null).
  bert["lowercase"] = false;
  t = load(wordpiece(bert));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("UNAFF cafe CAF\xC3\x89", false), (V{0, 10, 0}));

  json j = wordpiece(nullptr);
  j["model"].erase("vocab");
  expect_error(j.dump(), "model.vocab is missing");
  j = wordpiece(nullptr);
  j["model"].erase("unk_token");
  expect_error(j.dump(), "model.unk_token is missing");
  j = wordpiece(nullptr);
  j["model"]["unk_token"] = "<unk>";
  expect_error(j.dump(), "model.unk_token '<unk>' is not in model.vocab");
}

TEST(Tokenizer, FromFile) {
  auto path = std::filesystem::temp_directory_path() / ("gpuopt_tok_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << byte_level({{"a", 0}, {"b", 1}, {"ab", 2}}, {"a b"}).dump();
  auto t = Tokenizer::from_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->encode("abba", true), (std::vector<int64_t>{2, 1, 0}));
}

}  // namespace
}  // namespace gpuopt::llm
