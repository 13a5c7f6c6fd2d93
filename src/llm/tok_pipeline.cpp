// Normalizers and pre-tokenizers of tokenizer.json (tok_pipeline.h), and the JSON helpers.
#include "llm/tok_pipeline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/tok_unicode.h"
#include "llm/tok_wordpiece.h"

namespace gpuopt::llm::tok {

using json = nlohmann::json;

Status check_depth(int depth, const std::string& where) {
  if (depth > kMaxNesting) return Status::InvalidArgument("{}: sequences nested more than {} deep", where, kMaxNesting);
  return Status::Ok();
}

Result<std::string> type_of(const json& j, const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument("{} is not an object", where);
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return Status::InvalidArgument("{} has no \"type\"", where);
  return t->get<std::string>();
}

Result<std::string> get_string(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Status::InvalidArgument("{}.{} is missing or not a string", where, key);
  return it->get<std::string>();
}

bool get_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

Result<const json*> get_array(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return Status::InvalidArgument("{}.{} is missing or not a list", where, key);
  return &*it;
}

Result<Pattern> parse_pattern(const json& j, const std::string& where) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object()) return Status::InvalidArgument("{}.pattern is missing", where);
  Pattern p;
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    p.literal = s->get<std::string>();
    return p;
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    auto re = Regex::compile(r->get<std::string>());
    if (!re.ok()) return re.status().with_context(where + ".pattern");
    p.regex = *re;
    return p;
  }
  return Status::InvalidArgument("{}.pattern is neither {{\"String\": ...}} nor {{\"Regex\": ...}}", where);
}

std::string replace_all(std::string_view s, const Pattern& p, std::string_view content) {
  auto matches = p.find_all(s);
  if (matches.empty()) return std::string(s);
  std::string out;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(s.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(s.substr(prev));
  return out;
}

namespace {

// The character-predicate patterns of `tokenizers` (each matching character is one match).
template <typename Pred>
std::vector<std::pair<size_t, size_t>> find_chars(std::string_view s, Pred pred) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    if (st.valid && pred(st.cp)) out.emplace_back(i, i + st.len);
    i += st.len;
  }
  return out;
}

// The matches of Whitespace's \w+|[^\w\s]+ (Oniguruma's Unicode \w and \s): maximal runs of word
// characters and runs of characters that are neither word nor space.
std::vector<std::pair<size_t, size_t>> word_runs(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  int prev = 0;  // 0 space, 1 word, 2 other
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    int cls = !st.valid ? 2 : is_whitespace(st.cp) ? 0 : is_onig_word_char(st.cp) ? 1 : 2;
    if (cls != 0 && cls == prev)
      out.back().second = i + st.len;
    else if (cls != 0)
      out.emplace_back(i, i + st.len);
    prev = cls;
    i += st.len;
  }
  return out;
}

// NormalizedString::split: matches (plus the gaps between them) grouped by `behavior`.
void split_piece(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& found,
                 PreTokenizer::Behavior behavior, bool invert, std::vector<Piece>& out) {
  const std::string& s = piece.text;
  struct Part {
    size_t b, e;
    bool match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  for (auto [b, e] : found) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size() || parts.empty()) parts.push_back({prev, s.size(), false});
  if (invert) {
    for (auto& p : parts) p.match = !p.match;
  }
  using B = PreTokenizer::Behavior;
  std::vector<Part> groups;  // match = remove
  switch (behavior) {
    case B::kIsolated:
      for (auto p : parts) groups.push_back({p.b, p.e, false});
      break;
    case B::kRemoved:
      groups = parts;
      break;
    case B::kContiguous: {
      bool prev_match = false;
      for (auto p : parts) {
        if (p.match == prev_match && !groups.empty())
          groups.back().e = p.e;
        else
          groups.push_back({p.b, p.e, false});
        prev_match = p.match;
      }
      break;
    }
    case B::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto p : parts) {
        if (p.match && !prev_match && !groups.empty())
          groups.back().e = p.e;
        else
          groups.push_back({p.b, p.e, false});
        prev_match = p.match;
      }
      break;
    }
    case B::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !prev_match && !groups.empty())
          groups.back().b = it->b;
        else
          groups.push_back({it->b, it->e, false});
        prev_match = it->match;
      }
      std::reverse(groups.begin(), groups.end());
      break;
    }
  }
  for (const auto& g : groups) {
    if (g.match || g.e == g.b) continue;  // removed, or empty (PreTokenizedString drops those)
    out.push_back({s.substr(g.b, g.e - g.b), piece.at_start && g.b == 0});
  }
}

template <typename F>
void split_each(std::vector<Piece>& pieces, F&& fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (const Piece& p : pieces) fn(p, out);
  pieces = std::move(out);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  return regex ? regex->find_all(text) : find_literal(text, literal);
}

Result<Normalizer> parse_normalizer(const json& j, const std::string& where, int depth) {
  GPUOPT_RETURN_IF_ERROR(check_depth(depth, where));
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  Normalizer n;
  using K = Normalizer::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "normalizers", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Normalizer c,
                              parse_normalizer((*list)[i], fmt::format("{}.normalizers[{}]", where, i), depth + 1));
      n.children.push_back(std::move(c));
    }
  } else if (type == "NFC") {
    n.kind = K::kNfc;
  } else if (type == "NFD") {
    n.kind = K::kNfd;
  } else if (type == "NFKC") {
    n.kind = K::kNfkc;
  } else if (type == "NFKD") {
    n.kind = K::kNfkd;
  } else if (type == "Lowercase") {
    n.kind = K::kLowercase;
  } else if (type == "StripAccents") {
    n.kind = K::kStripAccents;
  } else if (type == "ByteLevel") {
    n.kind = K::kByteLevel;
  } else if (type == "Prepend") {
    n.kind = K::kPrepend;
    GPUOPT_ASSIGN_OR_RETURN(n.text, get_string(j, "prepend", where));
  } else if (type == "Replace") {
    n.kind = K::kReplace;
    GPUOPT_ASSIGN_OR_RETURN(n.pattern, parse_pattern(j, where));
    GPUOPT_ASSIGN_OR_RETURN(n.text, get_string(j, "content", where));
  } else if (type == "Strip") {
    n.kind = K::kStrip;
    n.left = get_bool(j, "strip_left", true);
    n.right = get_bool(j, "strip_right", true);
  } else if (type == "BertNormalizer") {
    n.kind = K::kBert;
    n.clean_text = get_bool(j, "clean_text", true);
    n.chinese = get_bool(j, "handle_chinese_chars", true);
    n.bert_lowercase = get_bool(j, "lowercase", true);
    n.bert_strip_accents = get_bool(j, "strip_accents", n.bert_lowercase);  // null: as lowercase
  } else {
    return Status::Unimplemented(
        "{}: normalizer type '{}' is not supported (supported: Sequence, NFC, NFD, NFKC, "
        "NFKD, Lowercase, Prepend, Replace, Strip, StripAccents, ByteLevel, BertNormalizer)",
        where, type);
  }
  return n;
}

void normalize(const Normalizer& n, std::string& s) {
  using K = Normalizer::Kind;
  switch (n.kind) {
    case K::kSequence:
      for (const auto& c : n.children) normalize(c, s);
      break;
    case K::kNfc:
      s = normalize_unicode(s, NormForm::kNfc);
      break;
    case K::kNfd:
      s = normalize_unicode(s, NormForm::kNfd);
      break;
    case K::kNfkc:
      s = normalize_unicode(s, NormForm::kNfkc);
      break;
    case K::kNfkd:
      s = normalize_unicode(s, NormForm::kNfkd);
      break;
    case K::kLowercase:
      s = lowercase(s);
      break;
    case K::kStripAccents:
      s = strip_accents(s);
      break;
    case K::kPrepend:
      if (!s.empty()) s.insert(0, n.text);
      break;
    case K::kReplace:
      s = replace_all(s, n.pattern, n.text);
      break;
    case K::kBert:
      s = bert_normalize(s, {n.clean_text, n.chinese, n.bert_strip_accents, n.bert_lowercase});
      break;
    case K::kByteLevel: {
      std::string out;
      out.reserve(s.size() * 2);
      for (unsigned char c : s) out += byte_to_char_utf8(c);
      s = std::move(out);
      break;
    }
    case K::kStrip: {
      size_t b = 0, e = s.size();
      if (n.left) {
        while (b < e) {
          Utf8Step st = utf8_step(s, b);
          if (!st.valid || !is_whitespace(st.cp)) break;
          b += st.len;
        }
      }
      if (n.right) {  // the end of the last character that is not whitespace
        size_t last = b;
        for (size_t i = b; i < e;) {
          Utf8Step st = utf8_step(s, i);
          i += st.len;
          if (!st.valid || !is_whitespace(st.cp)) last = i;
        }
        e = last;
      }
      s = s.substr(b, e - b);
      break;
    }
  }
}

Result<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where, int depth) {
  GPUOPT_RETURN_IF_ERROR(check_depth(depth, where));
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  PreTokenizer p;
  using K = PreTokenizer::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "pretokenizers", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(
          PreTokenizer c, parse_pre_tokenizer((*list)[i], fmt::format("{}.pretokenizers[{}]", where, i), depth + 1));
      p.children.push_back(std::move(c));
    }
  } else if (type == "ByteLevel") {
    p.kind = K::kByteLevel;
    p.add_prefix_space = get_bool(j, "add_prefix_space", true);
    p.use_regex = get_bool(j, "use_regex", true);
    if (p.use_regex) {
      static const auto gpt2 =
          Regex::compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
      if (!gpt2.ok()) return gpt2.status();
      p.pattern.regex = *gpt2;
    }
  } else if (type == "Split") {
    p.kind = K::kSplit;
    GPUOPT_ASSIGN_OR_RETURN(p.pattern, parse_pattern(j, where));
    GPUOPT_ASSIGN_OR_RETURN(std::string b, get_string(j, "behavior", where));
    using B = PreTokenizer::Behavior;
    if (b == "Removed")
      p.behavior = B::kRemoved;
    else if (b == "Isolated")
      p.behavior = B::kIsolated;
    else if (b == "MergedWithPrevious")
      p.behavior = B::kMergedWithPrevious;
    else if (b == "MergedWithNext")
      p.behavior = B::kMergedWithNext;
    else if (b == "Contiguous")
      p.behavior = B::kContiguous;
    else
      return Status::InvalidArgument("{}.behavior '{}' is not a split behavior", where, b);
    p.invert = get_bool(j, "invert", false);
  } else if (type == "Metaspace") {
    p.kind = K::kMetaspace;
    GPUOPT_ASSIGN_OR_RETURN(p.replacement, get_string(j, "replacement", where));
    if (p.replacement.empty() || utf8_step(p.replacement, 0).len != p.replacement.size()) {
      return Status::InvalidArgument("{}.replacement '{}' is not one character", where, p.replacement);
    }
    std::string scheme = "always";
    if (auto s = j.find("prepend_scheme"); s != j.end() && s->is_string()) scheme = s->get<std::string>();
    if (scheme == "always")
      p.prepend = PreTokenizer::Prepend::kAlways;
    else if (scheme == "first")
      p.prepend = PreTokenizer::Prepend::kFirst;
    else if (scheme == "never")
      p.prepend = PreTokenizer::Prepend::kNever;
    else
      return Status::InvalidArgument("{}.prepend_scheme '{}' is not always, first or never", where, scheme);
    if (!get_bool(j, "add_prefix_space", true)) p.prepend = PreTokenizer::Prepend::kNever;
    p.split = get_bool(j, "split", true);
  } else if (type == "Digits") {
    p.kind = K::kDigits;
    p.individual_digits = get_bool(j, "individual_digits", false);
  } else if (type == "WhitespaceSplit") {
    p.kind = K::kWhitespaceSplit;
  } else if (type == "Whitespace") {
    p.kind = K::kWhitespace;
  } else if (type == "BertPreTokenizer") {
    p.kind = K::kBert;
  } else {
    return Status::Unimplemented(
        "{}: pre-tokenizer type '{}' is not supported (supported: Sequence, ByteLevel, Split, "
        "Metaspace, Digits, WhitespaceSplit, Whitespace, BertPreTokenizer)",
        where, type);
  }
  return p;
}

void pre_tokenize(const PreTokenizer& p, std::vector<Piece>& pieces) {
  using K = PreTokenizer::Kind;
  using B = PreTokenizer::Behavior;
  switch (p.kind) {
    case K::kSequence:
      for (const auto& c : p.children) pre_tokenize(c, pieces);
      break;
    case K::kByteLevel:
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        // (Built anew rather than insert(0, " "): GCC 12's -Wrestrict misfires on that here.)
        bool prefix = p.add_prefix_space && (in.text.empty() || in.text[0] != ' ');
        Piece piece{prefix ? " " + in.text : in.text, in.at_start};
        if (p.use_regex)
          split_piece(piece, p.pattern.find_all(piece.text), B::kIsolated, false, out);
        else if (!piece.text.empty())
          out.push_back(std::move(piece));
      });
      for (Piece& piece : pieces) {
        std::string mapped;
        mapped.reserve(piece.text.size() * 2);
        for (unsigned char c : piece.text) mapped += byte_to_char_utf8(c);
        piece.text = std::move(mapped);
      }
      break;
    case K::kSplit:
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, p.pattern.find_all(in.text), p.behavior, p.invert, out);
      });
      break;
    case K::kMetaspace:
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        Piece piece{replace_all(in.text, Pattern{" ", nullptr}, p.replacement), in.at_start};
        bool starts = piece.text.compare(0, p.replacement.size(), p.replacement) == 0;
        if (!starts && (p.prepend == PreTokenizer::Prepend::kAlways ||
                        (p.prepend == PreTokenizer::Prepend::kFirst && piece.at_start))) {
          piece.text.insert(0, p.replacement);
        }
        if (p.split)
          split_piece(piece, find_literal(piece.text, p.replacement), B::kMergedWithNext, false, out);
        else if (!piece.text.empty())
          out.push_back(std::move(piece));
      });
      break;
    case K::kDigits:
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, find_chars(in.text, is_numeric), p.individual_digits ? B::kIsolated : B::kContiguous, false,
                    out);
      });
      break;
    case K::kWhitespaceSplit:
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, find_chars(in.text, is_whitespace), B::kRemoved, false, out);
      });
      break;
    case K::kWhitespace:  // the regex \w+|[^\w\s]+, its matches kept
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, word_runs(in.text), B::kRemoved, true, out);
      });
      break;
    case K::kBert:  // whitespace removed, then each punctuation character on its own
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, find_chars(in.text, is_whitespace), B::kRemoved, false, out);
      });
      split_each(pieces, [&](const Piece& in, std::vector<Piece>& out) {
        split_piece(in, find_chars(in.text, is_bert_punctuation), B::kIsolated, false, out);
      });
      break;
  }
}

}  // namespace gpuopt::llm::tok
