// The stages of tokenizer.json around the BPE model, parsed from JSON and applied as `tokenizers`
// applies them: normalizers (text -> text), pre-tokenizers (pieces -> smaller pieces), decoders
// (token strings -> text) and the post-processor (ids -> ids with BOS/EOS). Each parser refuses a
// type it does not know by name (Status Unimplemented), so a file is never half understood.
// Sequences nest at most kMaxNesting deep (a hostile file must not exhaust the stack).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "llm/tok_regex.h"

namespace gpuopt::llm::tok {

constexpr int kMaxNesting = 16;

// A string or regex pattern ({"String": "..."} / {"Regex": "..."}).
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;  // set for Regex patterns
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
};

struct Normalizer {
  enum class Kind {
    kSequence,
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,
    kPrepend,
    kReplace,
    kStrip,
    kStripAccents,
    kByteLevel,
    kBert
  };
  Kind kind = Kind::kSequence;
  std::string text;                  // Prepend's prefix, Replace's content
  Pattern pattern;                   // Replace's pattern
  bool left = false, right = false;  // Strip
  // BertNormalizer: clean_text, handle_chinese_chars, strip_accents (null: as lowercase), lowercase
  bool clean_text = true, chinese = true, bert_strip_accents = true, bert_lowercase = true;
  std::vector<Normalizer> children;
};
Result<Normalizer> parse_normalizer(const nlohmann::json& j, const std::string& where, int depth = 0);
void normalize(const Normalizer& n, std::string& s);

// One piece of text on its way to the model. `at_start`: it begins at offset 0 of the input
// (Metaspace's prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool at_start = false;
};

struct PreTokenizer {
  enum class Kind { kSequence, kByteLevel, kSplit, kMetaspace, kDigits, kWhitespaceSplit, kWhitespace, kBert };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSequence;
  bool add_prefix_space = false, use_regex = true;  // ByteLevel
  Pattern pattern;                                  // Split (ByteLevel's regex when use_regex)
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  std::string replacement;  // Metaspace
  Prepend prepend = Prepend::kAlways;
  bool split = true;
  bool individual_digits = false;  // Digits
  std::vector<PreTokenizer> children;
};
Result<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const std::string& where, int depth = 0);
void pre_tokenize(const PreTokenizer& p, std::vector<Piece>& pieces);

struct Decoder {
  enum class Kind { kSequence, kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip, kBpeSuffix, kWordPiece };
  Kind kind = Kind::kSequence;
  std::string replacement;  // Metaspace's, Replace's content, BPEDecoder's suffix, WordPiece's prefix
  bool cleanup = true;      // WordPiece
  Pattern pattern;          // Replace
  bool prepend_never = false;
  std::string strip_content;
  size_t strip_start = 0, strip_stop = 0;
  std::vector<Decoder> children;
};
Result<Decoder> parse_decoder(const nlohmann::json& j, const std::string& where, int depth = 0);
void decode_chain(const Decoder& d, std::vector<std::string>& tokens);

// TemplateProcessing's "single" template (also Bert/Roberta processing), as a list of pieces:
// either the sequence (ids empty) or special ids.
struct PostProcessor {
  std::vector<std::vector<int64_t>> single;  // an empty entry stands for the sequence $A
  bool has_template = false;
};
Result<PostProcessor> parse_post_processor(const nlohmann::json& j, const std::string& where);

// JSON helpers shared by tok_pipeline.cpp and tok_decoders.cpp; errors name `where`.
Status check_depth(int depth, const std::string& where);
Result<std::string> type_of(const nlohmann::json& j, const std::string& where);
Result<std::string> get_string(const nlohmann::json& j, const char* key, const std::string& where);
bool get_bool(const nlohmann::json& j, const char* key, bool dflt);
Result<const nlohmann::json*> get_array(const nlohmann::json& j, const char* key, const std::string& where);
Result<Pattern> parse_pattern(const nlohmann::json& j, const std::string& where);  // j["pattern"]
std::string replace_all(std::string_view s, const Pattern& p, std::string_view content);

}  // namespace gpuopt::llm::tok
