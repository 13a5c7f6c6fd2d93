#include "llm/tok_pipeline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

using json = nlohmann::json;

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
        if (p.match == prev_match && !groups.empty()) groups.back().e = p.e;
        else groups.push_back({p.b, p.e, false});
        prev_match = p.match;
      }
      break;
    }
    case B::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto p : parts) {
        if (p.match && !prev_match && !groups.empty()) groups.back().e = p.e;
        else groups.push_back({p.b, p.e, false});
        prev_match = p.match;
      }
      break;
    }
    case B::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !prev_match && !groups.empty()) groups.back().b = it->b;
        else groups.push_back({it->b, it->e, false});
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

Result<Normalizer> parse_normalizer(const json& j, const std::string& where) {
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  Normalizer n;
  using K = Normalizer::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "normalizers", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Normalizer c, parse_normalizer((*list)[i], fmt::format("{}.normalizers[{}]", where, i)));
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
  } else {
    return Status::Unimplemented("{}: normalizer type '{}' is not supported (supported: Sequence, NFC, NFD, NFKC, "
                                 "NFKD, Lowercase, Prepend, Replace, Strip, StripAccents, ByteLevel)",
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
    case K::kNfc: s = normalize_unicode(s, NormForm::kNfc); break;
    case K::kNfd: s = normalize_unicode(s, NormForm::kNfd); break;
    case K::kNfkc: s = normalize_unicode(s, NormForm::kNfkc); break;
    case K::kNfkd: s = normalize_unicode(s, NormForm::kNfkd); break;
    case K::kLowercase: s = lowercase(s); break;
    case K::kStripAccents: s = strip_accents(s); break;
    case K::kPrepend:
      if (!s.empty()) s.insert(0, n.text);
      break;
    case K::kReplace: s = replace_all(s, n.pattern, n.text); break;
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

Result<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where) {
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  PreTokenizer p;
  using K = PreTokenizer::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "pretokenizers", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(PreTokenizer c,
                              parse_pre_tokenizer((*list)[i], fmt::format("{}.pretokenizers[{}]", where, i)));
      p.children.push_back(std::move(c));
    }
  } else if (type == "ByteLevel") {
    p.kind = K::kByteLevel;
    p.add_prefix_space = get_bool(j, "add_prefix_space", true);
    p.use_regex = get_bool(j, "use_regex", true);
    if (p.use_regex) {
      static const auto gpt2 = Regex::compile(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
      if (!gpt2.ok()) return gpt2.status();
      p.pattern.regex = *gpt2;
    }
  } else if (type == "Split") {
    p.kind = K::kSplit;
    GPUOPT_ASSIGN_OR_RETURN(p.pattern, parse_pattern(j, where));
    GPUOPT_ASSIGN_OR_RETURN(std::string b, get_string(j, "behavior", where));
    using B = PreTokenizer::Behavior;
    if (b == "Removed") p.behavior = B::kRemoved;
    else if (b == "Isolated") p.behavior = B::kIsolated;
    else if (b == "MergedWithPrevious") p.behavior = B::kMergedWithPrevious;
    else if (b == "MergedWithNext") p.behavior = B::kMergedWithNext;
    else if (b == "Contiguous") p.behavior = B::kContiguous;
    else return Status::InvalidArgument("{}.behavior '{}' is not a split behavior", where, b);
    p.invert = get_bool(j, "invert", false);
  } else if (type == "Metaspace") {
    p.kind = K::kMetaspace;
    GPUOPT_ASSIGN_OR_RETURN(p.replacement, get_string(j, "replacement", where));
    if (p.replacement.empty() || utf8_step(p.replacement, 0).len != p.replacement.size()) {
      return Status::InvalidArgument("{}.replacement '{}' is not one character", where, p.replacement);
    }
    std::string scheme = "always";
    if (auto s = j.find("prepend_scheme"); s != j.end() && s->is_string()) scheme = s->get<std::string>();
    if (scheme == "always") p.prepend = PreTokenizer::Prepend::kAlways;
    else if (scheme == "first") p.prepend = PreTokenizer::Prepend::kFirst;
    else if (scheme == "never") p.prepend = PreTokenizer::Prepend::kNever;
    else return Status::InvalidArgument("{}.prepend_scheme '{}' is not always, first or never", where, scheme);
    if (!get_bool(j, "add_prefix_space", true)) p.prepend = PreTokenizer::Prepend::kNever;
    p.split = get_bool(j, "split", true);
  } else if (type == "Digits") {
    p.kind = K::kDigits;
    p.individual_digits = get_bool(j, "individual_digits", false);
  } else if (type == "WhitespaceSplit") {
    p.kind = K::kWhitespaceSplit;
  } else {
    return Status::Unimplemented("{}: pre-tokenizer type '{}' is not supported (supported: Sequence, ByteLevel, Split, "
                                 "Metaspace, Digits, WhitespaceSplit)",
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
        Piece piece = in;
        if (p.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
        if (p.use_regex) split_piece(piece, p.pattern.find_all(piece.text), B::kIsolated, false, out);
        else if (!piece.text.empty()) out.push_back(std::move(piece));
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
        if (p.split) split_piece(piece, find_literal(piece.text, p.replacement), B::kMergedWithNext, false, out);
        else if (!piece.text.empty()) out.push_back(std::move(piece));
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
  }
}

Result<Decoder> parse_decoder(const json& j, const std::string& where) {
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  Decoder d;
  using K = Decoder::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "decoders", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Decoder c, parse_decoder((*list)[i], fmt::format("{}.decoders[{}]", where, i)));
      d.children.push_back(std::move(c));
    }
  } else if (type == "ByteLevel") {
    d.kind = K::kByteLevel;
  } else if (type == "Metaspace") {
    d.kind = K::kMetaspace;
    GPUOPT_ASSIGN_OR_RETURN(d.replacement, get_string(j, "replacement", where));
    std::string scheme = "always";
    if (auto s = j.find("prepend_scheme"); s != j.end() && s->is_string()) scheme = s->get<std::string>();
    d.prepend_never = scheme == "never" || !get_bool(j, "add_prefix_space", true);
  } else if (type == "Replace") {
    d.kind = K::kReplace;
    GPUOPT_ASSIGN_OR_RETURN(d.pattern, parse_pattern(j, where));
    GPUOPT_ASSIGN_OR_RETURN(d.replacement, get_string(j, "content", where));
  } else if (type == "ByteFallback") {
    d.kind = K::kByteFallback;
  } else if (type == "Fuse") {
    d.kind = K::kFuse;
  } else if (type == "Strip") {
    d.kind = K::kStrip;
    GPUOPT_ASSIGN_OR_RETURN(d.strip_content, get_string(j, "content", where));
    if (d.strip_content.empty() || utf8_step(d.strip_content, 0).len != d.strip_content.size()) {
      return Status::InvalidArgument("{}.content '{}' is not one character", where, d.strip_content);
    }
    auto num = [&](const char* key) -> size_t {
      auto it = j.find(key);
      return it != j.end() && it->is_number_unsigned() ? it->get<size_t>() : 0;
    };
    d.strip_start = num("start");
    d.strip_stop = num("stop");
  } else if (type == "BPEDecoder") {
    d.kind = K::kBpeSuffix;
    d.replacement = "</w>";
    if (auto s = j.find("suffix"); s != j.end() && s->is_string()) d.replacement = s->get<std::string>();
  } else {
    return Status::Unimplemented("{}: decoder type '{}' is not supported (supported: Sequence, ByteLevel, Metaspace, "
                                 "Replace, ByteFallback, Fuse, Strip, BPEDecoder)",
                                 where, type);
  }
  return d;
}

void decode_chain(const Decoder& d, std::vector<std::string>& tokens) {
  using K = Decoder::Kind;
  switch (d.kind) {
    case K::kSequence:
      for (const auto& c : d.children) decode_chain(c, tokens);
      break;
    case K::kByteLevel: {
      std::string bytes;
      for (const std::string& t : tokens) {
        size_t start = bytes.size();
        bool all = true;
        for (size_t i = 0; i < t.size() && all;) {
          Utf8Step st = utf8_step(t, i);
          int b = st.valid ? char_to_byte(st.cp) : -1;
          if (b < 0) all = false;
          else bytes += static_cast<char>(b);
          i += st.len;
        }
        if (!all) bytes.replace(start, std::string::npos, t);  // not byte-level text: its own bytes
      }
      tokens.assign(1, utf8_lossy(bytes));
      break;
    }
    case K::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string_view r = d.replacement;
        std::string out;
        const std::string& t = tokens[i];
        for (size_t k = 0; k < t.size();) {
          if (!r.empty() && t.compare(k, r.size(), r) == 0) {
            if (i != 0 || d.prepend_never) out += ' ';
            k += r.size();
          } else {
            out += t[k++];
          }
        }
        tokens[i] = std::move(out);
      }
      break;
    case K::kReplace:
      for (auto& t : tokens) t = replace_all(t, d.pattern, d.replacement);
      break;
    case K::kByteFallback: {
      std::vector<std::string> out;
      std::string bytes;
      size_t nbytes = 0;
      auto flush = [&] {
        if (nbytes == 0) return;
        if (is_valid_utf8(bytes)) {
          out.push_back(bytes);
        } else {
          for (size_t k = 0; k < nbytes; ++k) out.push_back("\xEF\xBF\xBD");
        }
        bytes.clear();
        nbytes = 0;
      };
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      for (auto& t : tokens) {
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0) {
          bytes += static_cast<char>(hex(t[3]) * 16 + hex(t[4]));
          ++nbytes;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens = std::move(out);
      break;
    }
    case K::kFuse: {
      std::string all;
      for (const auto& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case K::kStrip:
      for (auto& t : tokens) {
        const std::string& c = d.strip_content;
        size_t b = 0, e = t.size();
        for (size_t k = 0; k < d.strip_start && b + c.size() <= e && t.compare(b, c.size(), c) == 0; ++k) b += c.size();
        for (size_t k = 0; k < d.strip_stop && e >= b + c.size() && t.compare(e - c.size(), c.size(), c) == 0; ++k) {
          e -= c.size();
        }
        t = t.substr(b, e - b);
      }
      break;
    case K::kBpeSuffix:
      for (size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = replace_all(tokens[i], Pattern{d.replacement, nullptr}, i + 1 == tokens.size() ? "" : " ");
      }
      break;
  }
}

namespace {

Result<int64_t> special_id(const json& pair, const std::string& where) {
  // Bert/Roberta processors spell a special token as ["<s>", 0].
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    return Status::InvalidArgument("{} is not [token, id]", where);
  }
  return pair[1].get<int64_t>();
}

Status parse_post_into(const json& j, const std::string& where, PostProcessor& pp) {
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "processors", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_RETURN_IF_ERROR(parse_post_into((*list)[i], fmt::format("{}.processors[{}]", where, i), pp));
    }
    return Status::Ok();
  }
  if (pp.has_template) return Status::Unimplemented("{}: more than one template post-processor", where);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto cls = j.find("cls"), sep = j.find("sep");
    if (cls == j.end() || sep == j.end()) return Status::InvalidArgument("{} needs cls and sep", where);
    GPUOPT_ASSIGN_OR_RETURN(int64_t c, special_id(*cls, where + ".cls"));
    GPUOPT_ASSIGN_OR_RETURN(int64_t s, special_id(*sep, where + ".sep"));
    pp.single = {{c}, {}, {s}};
    pp.has_template = true;
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return Status::Unimplemented("{}: post-processor type '{}' is not supported (supported: TemplateProcessing, "
                                 "ByteLevel, Sequence, BertProcessing, RobertaProcessing)",
                                 where, type);
  }
  GPUOPT_ASSIGN_OR_RETURN(const json* single, get_array(j, "single", where));
  auto specials = j.find("special_tokens");
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    std::string w = fmt::format("{}.single[{}]", where, i);
    if (item.contains("Sequence")) {
      const json& seq = item["Sequence"];
      if (!seq.is_object() || seq.value("id", "") != "A") {
        return Status::InvalidArgument("{}: a single-sequence template can only name sequence A", w);
      }
      pp.single.emplace_back();
    } else if (item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
      std::string name = item["SpecialToken"].value("id", "");
      if (specials == j.end() || !specials->is_object() || !specials->contains(name)) {
        return Status::InvalidArgument("{}: special token '{}' is not in {}.special_tokens", w, name, where);
      }
      const json& st = (*specials)[name];
      auto ids = st.find("ids");
      if (ids == st.end() || !ids->is_array()) return Status::InvalidArgument("{}.special_tokens['{}'].ids is missing", where, name);
      std::vector<int64_t> v;
      for (const auto& id : *ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0) {
          return Status::InvalidArgument("{}.special_tokens['{}'].ids holds a non-id", where, name);
        }
        v.push_back(id.get<int64_t>());
      }
      if (v.empty()) continue;  // nothing to insert
      pp.single.push_back(std::move(v));
    } else {
      return Status::InvalidArgument("{} is neither a Sequence nor a SpecialToken", w);
    }
  }
  pp.has_template = true;
  return Status::Ok();
}

}  // namespace

Result<PostProcessor> parse_post_processor(const json& j, const std::string& where) {
  PostProcessor pp;
  GPUOPT_RETURN_IF_ERROR(parse_post_into(j, where, pp));
  return pp;
}

}  // namespace gpuopt::llm::tok
