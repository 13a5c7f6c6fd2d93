// WordPiece (tok_wordpiece.h) and the BERT normalizer's and pre-tokenizer's character classes.
#include "llm/tok_wordpiece.h"

#include <utf8proc.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

using json = nlohmann::json;

struct Range {
  char32_t lo, hi;
};

// Where the unicode_categories crate (which `tokenizers` asks for Other, Mn and punctuation)
// disagrees with utf8proc's Unicode: mostly characters that became marks or punctuation in later
// Unicode versions, which the crate's older tables do not know. Found by running `tokenizers`
// 0.23's BertNormalizer and BertPreTokenizer over every code point and comparing
// (tests/python/test_llm_wordpiece.py sweeps them again).
// Other (Cc, Cf, Co) in utf8proc that clean_text keeps:
constexpr Range kNotOther[] = {
    {0x890, 0x891},
    {0x8E2, 0x8E2},
    {0x110CD, 0x110CD},
    {0x13430, 0x1343F},
};
// Mn for the crate, not for utf8proc; Mn for utf8proc, not for the crate:
constexpr Range kMnExtra[] = {
    {0x1734, 0x1734},
};
constexpr Range kMnMissing[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8E1},     {0x9FE, 0x9FE},     {0xAFA, 0xAFF},
    {0xB55, 0xB55},     {0xC04, 0xC04},     {0xC3C, 0xC3C},     {0xD00, 0xD00},     {0xD3B, 0xD3C},
    {0xD81, 0xD81},     {0xEBA, 0xEBA},     {0xECE, 0xECE},     {0x180F, 0x180F},   {0x1885, 0x1886},
    {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFB},   {0xA82C, 0xA82C},   {0xA8C5, 0xA8C5},   {0xA8FF, 0xA8FF},
    {0xA9BD, 0xA9BD},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074}, {0x110C2, 0x110C2}, {0x111C9, 0x111C9},
    {0x111CF, 0x111CF}, {0x1123E, 0x1123E}, {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x11438, 0x1143F},
    {0x11442, 0x11444}, {0x11446, 0x11446}, {0x1145E, 0x1145E}, {0x1182F, 0x11837}, {0x11839, 0x1183A},
    {0x1193B, 0x1193C}, {0x1193E, 0x1193E}, {0x11943, 0x11943}, {0x119D4, 0x119D7}, {0x119DA, 0x119DB},
    {0x119E0, 0x119E0}, {0x11A01, 0x11A0A}, {0x11A33, 0x11A38}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47},
    {0x11A51, 0x11A56}, {0x11A59, 0x11A5B}, {0x11A8A, 0x11A96}, {0x11A98, 0x11A99}, {0x11C30, 0x11C36},
    {0x11C38, 0x11C3D}, {0x11C3F, 0x11C3F}, {0x11C92, 0x11CA7}, {0x11CAA, 0x11CB0}, {0x11CB2, 0x11CB3},
    {0x11CB5, 0x11CB6}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45},
    {0x11D47, 0x11D47}, {0x11D90, 0x11D91}, {0x11D95, 0x11D95}, {0x11D97, 0x11D97}, {0x11EF3, 0x11EF4},
    {0x11F00, 0x11F01}, {0x11F36, 0x11F3A}, {0x11F40, 0x11F40}, {0x11F42, 0x11F42}, {0x13440, 0x13440},
    {0x13447, 0x13455}, {0x16F4F, 0x16F4F}, {0x16FE4, 0x16FE4}, {0x1CF00, 0x1CF2D}, {0x1CF30, 0x1CF46},
    {0x1E000, 0x1E006}, {0x1E008, 0x1E018}, {0x1E01B, 0x1E021}, {0x1E023, 0x1E024}, {0x1E026, 0x1E02A},
    {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
    {0x1E944, 0x1E94A},
};
// Punctuation for the crate, not for utf8proc; and the other way round:
constexpr Range kPunctExtra[] = {
    {0x166D, 0x166D},
    {0x111C9, 0x111C9},
};
constexpr Range kPunctMissing[] = {
    {0x61D, 0x61D},     {0x9FD, 0x9FD},     {0xA76, 0xA76},     {0xC77, 0xC77},     {0xC84, 0xC84},
    {0x1B7D, 0x1B7E},   {0x2E43, 0x2E4F},   {0x2E52, 0x2E5D},   {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59},
    {0x10F86, 0x10F89}, {0x1144B, 0x1144F}, {0x1145A, 0x1145B}, {0x1145D, 0x1145D}, {0x11660, 0x1166C},
    {0x116B9, 0x116B9}, {0x1183B, 0x1183B}, {0x11944, 0x11946}, {0x119E2, 0x119E2}, {0x11A3F, 0x11A46},
    {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2}, {0x11B00, 0x11B09}, {0x11C41, 0x11C45}, {0x11C70, 0x11C71},
    {0x11EF7, 0x11EF8}, {0x11F43, 0x11F4F}, {0x11FFF, 0x11FFF}, {0x12FF1, 0x12FF2}, {0x16E97, 0x16E9A},
    {0x16FE2, 0x16FE2}, {0x1E95E, 0x1E95F},
};

// Oniguruma's \w (Whitespace's pre-tokenizer) beyond tok_unicode's is_word_char: the letters and digits
// of Unicode 16 and the squared/circled/negative Latin capitals (So, but Alphabetic).
constexpr Range kOnigWordExtra[] = {
    {0x897, 0x897},     {0x1C89, 0x1C8A},   {0xA7CB, 0xA7CD},   {0xA7DA, 0xA7DC},   {0x105C0, 0x105F3},
    {0x10D40, 0x10D65}, {0x10D69, 0x10D6D}, {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x10EFC, 0x10EFC},
    {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113C0},
    {0x113C2, 0x113C2}, {0x113C5, 0x113C5}, {0x113C7, 0x113CA}, {0x113CC, 0x113D3}, {0x113E1, 0x113E2},
    {0x116D0, 0x116E3}, {0x11BC0, 0x11BE0}, {0x11BF0, 0x11BF9}, {0x11F5A, 0x11F5A}, {0x13460, 0x143FA},
    {0x16100, 0x16139}, {0x16D40, 0x16D6C}, {0x16D70, 0x16D79}, {0x18CFF, 0x18CFF}, {0x1CCF0, 0x1CCF9},
    {0x1E5D0, 0x1E5FA}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}, {0x2EBF0, 0x2EE5D},
};

template <size_t N>
bool in(const Range (&table)[N], char32_t c) {
  auto it = std::upper_bound(table, table + N, c, [](char32_t v, const Range& r) { return v < r.lo; });
  return it != table && c <= (it - 1)->hi;
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// BertNormalizer's is_control: the crate's is_other (Cc, Cf, Co), except \t, \n, \r.
bool is_bert_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  auto cat = category(c);
  bool other = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CO;
  return other && !in(kNotOther, c);
}

bool is_nonspacing_mark(char32_t c) {
  if (in(kMnExtra, c)) return true;
  return category(c) == UTF8PROC_CATEGORY_MN && !in(kMnMissing, c);
}

// The "CJK Unified Ideographs" blocks BertNormalizer surrounds with spaces.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Applies fn(cp) -> keep? to each valid character of s; invalid bytes are kept as they are.
template <typename F>
std::string map_chars(std::string_view s, F&& fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    if (st.valid)
      fn(st.cp, s.substr(i, st.len), out);
    else
      out.append(s.substr(i, st.len));
    i += st.len;
  }
  return out;
}

}  // namespace

bool is_onig_word_char(char32_t c) {
  return is_word_char(c) || in(kOnigWordExtra, c);
}

bool is_bert_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  if (in(kPunctExtra, c)) return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return !in(kPunctMissing, c);
    default:
      return false;
  }
}

std::string bert_normalize(std::string_view s, const BertNormalizerOptions& o) {
  std::string t(s);
  if (o.clean_text) {
    t = map_chars(t, [](char32_t c, std::string_view utf8, std::string& out) {
      if (c == 0 || c == 0xFFFD || is_bert_control(c)) return;
      if (c == '\t' || c == '\n' || c == '\r' || is_whitespace(c))
        out += ' ';
      else
        out.append(utf8);
    });
  }
  if (o.handle_chinese_chars) {
    t = map_chars(t, [](char32_t c, std::string_view utf8, std::string& out) {
      if (is_chinese_char(c)) out += ' ';
      out.append(utf8);
      if (is_chinese_char(c)) out += ' ';
    });
  }
  if (o.strip_accents) {
    t = map_chars(normalize_unicode(t, NormForm::kNfd), [](char32_t c, std::string_view utf8, std::string& out) {
      if (!is_nonspacing_mark(c)) out.append(utf8);
    });
  }
  if (o.lowercase) t = lowercase(t);
  return t;
}

Result<std::unique_ptr<WordPieceModel>> WordPieceModel::from_json(const json& m) {
  auto wp = std::make_unique<WordPieceModel>();
  GPUOPT_RETURN_IF_ERROR(read_vocab(m, &wp->vocab_, &wp->vocab_r_, &wp->has_id_));
  auto unk = m.find("unk_token");
  if (unk == m.end() || !unk->is_string()) return Status::InvalidArgument("model.unk_token is missing (WordPiece)");
  auto unk_id = wp->vocab_.find(unk->get<std::string>());
  if (unk_id == wp->vocab_.end()) {
    return Status::InvalidArgument("model.unk_token '{}' is not in model.vocab", unk->get<std::string>());
  }
  wp->unk_id_ = unk_id->second;
  if (auto p = m.find("continuing_subword_prefix"); p != m.end() && !p->is_null()) {
    if (!p->is_string()) return Status::InvalidArgument("model.continuing_subword_prefix is not a string");
    wp->prefix_ = p->get<std::string>();
  }
  if (auto n = m.find("max_input_chars_per_word"); n != m.end() && !n->is_null()) {
    if (!n->is_number_unsigned()) return Status::InvalidArgument("model.max_input_chars_per_word is not a count");
    wp->max_chars_ = n->get<size_t>();
  }
  return wp;
}

void WordPieceModel::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  std::vector<size_t> bounds;  // character boundaries, 0 .. word.size()
  bounds.reserve(word.size() + 1);
  for (size_t i = 0; i < word.size(); i += utf8_step(word, i).len) bounds.push_back(i);
  bounds.push_back(word.size());
  if (bounds.size() - 1 > max_chars_) {
    out.push_back(unk_id_);
    return;
  }
  const size_t first = out.size();
  std::string key;
  for (size_t b = 0; b + 1 < bounds.size();) {
    size_t e = bounds.size() - 1;
    int32_t id = -1;
    for (; e > b; --e) {  // longest match first
      std::string_view piece = word.substr(bounds[b], bounds[e] - bounds[b]);
      auto it = vocab_.end();
      if (b == 0) {
        it = vocab_.find(piece);
      } else {
        key.assign(prefix_).append(piece);
        it = vocab_.find(key);
      }
      if (it != vocab_.end()) {
        id = it->second;
        break;
      }
    }
    if (id < 0) {  // a piece nothing matches: the whole word is unknown
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(id);
    b = e;
  }
}

std::optional<int32_t> WordPieceModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* WordPieceModel::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(vocab_r_.size()) || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &vocab_r_[static_cast<size_t>(id)];
}

}  // namespace gpuopt::llm::tok
