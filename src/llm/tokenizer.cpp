// Tokenizer (tokenizer.h): the tokenizer.json pipeline of `tokenizers` — added tokens, normalizer,
// pre-tokenizer, BPE, post-processor; decoder — assembled from tok_*.{h,cpp}.
#include "llm/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "llm/tok_added.h"
#include "llm/tok_bpe.h"
#include "llm/tok_pipeline.h"
#include "llm/tok_unicode.h"
#include "llm/tok_wordpiece.h"

namespace gpuopt::llm {
namespace {

using json = nlohmann::json;
using namespace tok;

// DecodeStream holds at most this many ids back while the text ends in U+FFFD; past that the
// U+FFFD is real text (or bytes that will never complete) and goes out.
constexpr size_t kMaxHeldIds = 16;

class HfTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> build(const json& j);

  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int64_t id) const override;
  bool is_special(int64_t id) const override {
    auto it = added_by_id_.find(id);
    return it != added_by_id_.end() && added_[it->second].special;
  }

 private:
  void encode_gap(std::string_view text, bool at_start, std::vector<int64_t>& ids) const;

  std::optional<Normalizer> normalizer_;
  std::optional<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Model> model_;
  std::optional<PostProcessor> post_;
  std::optional<Decoder> decoder_;
  std::vector<AddedToken> added_;
  std::unordered_map<int64_t, size_t> added_by_id_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> added_by_content_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_contents_;
  AddedMatcher raw_matcher_, normalized_matcher_;
  int64_t vocab_size_ = 0;
};

Result<std::unique_ptr<Tokenizer>> HfTokenizer::build(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  if (auto v = j.find("version"); v != j.end() && (!v->is_string() || v->get<std::string>() != "1.0")) {
    return Status::Unimplemented("tokenizer.json version {} (only \"1.0\" is known)", v->dump());
  }
  auto t = std::make_unique<HfTokenizer>();
  auto m = j.find("model");
  if (m == j.end() || !m->is_object()) return Status::InvalidArgument("no \"model\" object");
  std::string type;
  if (auto ty = m->find("type"); ty != m->end() && ty->is_string()) {
    type = ty->get<std::string>();
  } else if (m->contains("merges")) {
    type = "BPE";  // files written before models carried their type
  } else if (m->contains("max_input_chars_per_word")) {
    type = "WordPiece";
  }
  if (type == "BPE") {
    auto model = BpeModel::from_json(*m);
    if (!model.ok()) return model.status();
    t->model_ = std::move(*model);
  } else if (type == "WordPiece") {
    auto model = WordPieceModel::from_json(*m);
    if (!model.ok()) return model.status();
    t->model_ = std::move(*model);
  } else {
    return Status::Unimplemented(
        "model type '{}' is not supported (BPE: GPT-2, Llama, Qwen, Mistral; WordPiece: BERT encoders)",
        type.empty() ? "(none)" : type);
  }

  auto stage = [&](const char* key) -> const json* {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json* n = stage("normalizer")) {
    GPUOPT_ASSIGN_OR_RETURN(t->normalizer_, parse_normalizer(*n, "normalizer"));
  }
  if (const json* p = stage("pre_tokenizer")) {
    GPUOPT_ASSIGN_OR_RETURN(t->pre_tokenizer_, parse_pre_tokenizer(*p, "pre_tokenizer"));
  }
  if (const json* p = stage("post_processor")) {
    GPUOPT_ASSIGN_OR_RETURN(t->post_, parse_post_processor(*p, "post_processor"));
  }
  if (const json* d = stage("decoder")) {
    GPUOPT_ASSIGN_OR_RETURN(t->decoder_, parse_decoder(*d, "decoder"));
  }

  int64_t max_id = t->model_->max_id();
  if (const json* list = stage("added_tokens")) {
    if (!list->is_array()) return Status::InvalidArgument("added_tokens is not a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const json& e = (*list)[i];
      if (!e.is_object() || !e.contains("content") || !e["content"].is_string()) {
        return Status::InvalidArgument("added_tokens[{}] has no content", i);
      }
      AddedToken a;
      a.content = e["content"].get<std::string>();
      if (a.content.empty()) continue;
      auto flag = [&](const char* k, bool d) { return e.contains(k) && e[k].is_boolean() ? e[k].get<bool>() : d; };
      a.special = flag("special", false);
      a.normalized = flag("normalized", !a.special);
      a.single_word = flag("single_word", false);
      a.lstrip = flag("lstrip", false);
      a.rstrip = flag("rstrip", false);
      // tokenizers gives a token that the model knows the model's id; the file's id otherwise.
      if (auto id = t->model_->token_to_id(a.content)) {
        a.id = *id;
      } else if (auto it = t->added_by_content_.find(a.content); it != t->added_by_content_.end()) {
        a.id = t->added_[it->second].id;
      } else if (e.contains("id") && e["id"].is_number_integer() && e["id"].get<int64_t>() >= 0 &&
                 e["id"].get<int64_t>() <= INT32_MAX) {
        a.id = e["id"].get<int64_t>();
      } else {
        return Status::InvalidArgument("added_tokens[{}] ('{}') has no valid id", i, a.content);
      }
      a.decoded = a.content;
      if (a.normalized && t->normalizer_) normalize(*t->normalizer_, a.decoded);
      max_id = std::max(max_id, a.id);
      if (a.special) t->special_contents_.insert(a.content);
      size_t index = t->added_.size();
      if (auto it = t->added_by_id_.find(a.id); it != t->added_by_id_.end()) {
        index = it->second;  // a later entry for the same id replaces the earlier one
        t->added_[index] = a;
      } else {
        t->added_.push_back(a);
        t->added_by_id_[a.id] = index;
      }
      t->added_by_content_[a.content] = index;
    }
    for (size_t i = 0; i < t->added_.size(); ++i) {
      const AddedToken& a = t->added_[i];
      if (a.normalized)
        t->normalized_matcher_.add(a.decoded, i);
      else
        t->raw_matcher_.add(a.content, i);
    }
  }
  t->vocab_size_ = max_id + 1;
  return std::unique_ptr<Tokenizer>(std::move(t));
}

void HfTokenizer::encode_gap(std::string_view text, bool at_start, std::vector<int64_t>& ids) const {
  std::string normalized(text);
  if (normalizer_) normalize(*normalizer_, normalized);
  if (normalized.empty()) return;
  std::vector<Split> splits;
  if (normalized_matcher_.empty())
    splits.push_back({0, normalized.size(), -1});
  else
    splits = normalized_matcher_.split(normalized, added_);
  std::vector<Piece> pieces;
  for (const Split& s : splits) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.assign(1, Piece{normalized.substr(s.begin, s.end - s.begin), at_start && s.begin == 0});
    if (pre_tokenizer_) pre_tokenize(*pre_tokenizer_, pieces);
    for (const Piece& p : pieces) model_->tokenize(p.text, ids);
  }
}

std::vector<int64_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  if (raw_matcher_.empty()) {
    if (!text.empty()) encode_gap(text, true, ids);
  } else {
    for (const Split& s : raw_matcher_.split(text, added_)) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        encode_gap(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids);
    }
  }
  if (!add_special_tokens || !post_ || !post_->has_template) return ids;
  std::vector<int64_t> out;
  out.reserve(ids.size() + 4);
  for (const auto& part : post_->single) {
    if (part.empty())
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string* s = nullptr;
    if (auto it = added_by_id_.find(id); it != added_by_id_.end())
      s = &added_[it->second].decoded;
    else
      s = model_->id_to_token(id);
    if (!s) continue;  // an id no token has: tokenizers drops it too
    if (skip_special_tokens && special_contents_.count(*s)) continue;
    tokens.push_back(*s);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decode_chain(*decoder_, tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int64_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_by_content_.find(token); it != added_by_content_.end()) return added_[it->second].id;
  if (auto id = model_->token_to_id(token)) return *id;
  return std::nullopt;
}

std::optional<std::string> HfTokenizer::id_to_token(int64_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return added_[it->second].content;
  if (const std::string* s = model_->id_to_token(id)) return *s;
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(const std::string& json_text, const std::string& where) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument("tokenizer '{}': invalid JSON: {}", where, e.what());
  }
  auto t = HfTokenizer::build(j);
  if (!t.ok()) return t.status().with_context(fmt::format("tokenizer '{}'", where));
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec)) {
    return Status::NotFound("tokenizer '{}': cannot open the file", path.string());
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path.string());
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

// tokenizers' step_decode_stream, plus the kMaxHeldIds bound.
std::string IncrementalDecoder::push(int64_t id) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  auto ends_replacement = [](const std::string& s) { return std::string_view(s).ends_with(kReplacement); };
  if (prefix_.empty() && !ids_.empty()) {
    std::string p = tok_.decode(ids_, skip_special_);
    if (!ends_replacement(p)) {
      prefix_ = std::move(p);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  std::string text = tok_.decode(ids_, skip_special_);
  bool held_too_long = ids_.size() - prefix_index_ > kMaxHeldIds;
  if (text.size() <= prefix_.size() || (ends_replacement(text) && !held_too_long)) return {};
  if (text.compare(0, prefix_.size(), prefix_) != 0) {
    // Only byte tokens that form no UTF-8 do this: ByteFallback turns the whole run into U+FFFDs,
    // also bytes that went out as a character (DecodeStream raises an error). What went out
    // stays; the text from where the two differ goes out, and the stream goes on from here.
    size_t common = 0;
    for (size_t i = 0; i < std::min(text.size(), prefix_.size()) && text[i] == prefix_[i];) {
      size_t len = tok::utf8_step(text, i).len;
      if (text.compare(i, len, prefix_, i, len) != 0) break;
      common = i += len;
    }
    std::string out = text.substr(common);
    prefix_ = std::move(text);
    prefix_index_ = ids_.size();
    return out;
  }
  std::string out = text.substr(prefix_.size());
  size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tok_.decode(ids_, skip_special_);
  prefix_index_ = new_prefix_index;
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string text = tok_.decode(ids_, skip_special_);
  std::string out;
  if (text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0) out = text.substr(prefix_.size());
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return out;
}

}  // namespace gpuopt::llm
