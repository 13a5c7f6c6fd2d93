// Decoders and post-processors of tokenizer.json (tok_pipeline.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/tok_pipeline.h"
#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {

using json = nlohmann::json;

namespace {

// The WordPiece decoder's cleanup: English spacing around punctuation and contractions, replaced
// in this order over the whole token.
std::string wordpiece_cleanup(std::string t) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) t = replace_all(t, Pattern{std::string(from), nullptr}, to);
  return t;
}

}  // namespace

Result<Decoder> parse_decoder(const json& j, const std::string& where, int depth) {
  GPUOPT_RETURN_IF_ERROR(check_depth(depth, where));
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  Decoder d;
  using K = Decoder::Kind;
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "decoders", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Decoder c,
                              parse_decoder((*list)[i], fmt::format("{}.decoders[{}]", where, i), depth + 1));
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
  } else if (type == "WordPiece") {
    d.kind = K::kWordPiece;
    d.replacement = "##";
    if (auto s = j.find("prefix"); s != j.end() && s->is_string()) d.replacement = s->get<std::string>();
    d.cleanup = get_bool(j, "cleanup", true);
  } else {
    return Status::Unimplemented(
        "{}: decoder type '{}' is not supported (supported: Sequence, ByteLevel, Metaspace, "
        "Replace, ByteFallback, Fuse, Strip, BPEDecoder, WordPiece)",
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
          if (b < 0)
            all = false;
          else
            bytes += static_cast<char>(b);
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
    case K::kWordPiece:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string& t = tokens[i];
        if (i != 0) {
          if (t.starts_with(d.replacement))
            t.erase(0, d.replacement.size());
          else
            t = " " + t;  // (not insert(0, " "): GCC 12's -Wrestrict misfires on that)
        }
        if (d.cleanup) t = wordpiece_cleanup(t);
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

Status parse_post_into(const json& j, const std::string& where, PostProcessor& pp, int depth) {
  GPUOPT_RETURN_IF_ERROR(check_depth(depth, where));
  GPUOPT_ASSIGN_OR_RETURN(std::string type, type_of(j, where));
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    GPUOPT_ASSIGN_OR_RETURN(const json* list, get_array(j, "processors", where));
    for (size_t i = 0; i < list->size(); ++i) {
      GPUOPT_RETURN_IF_ERROR(parse_post_into((*list)[i], fmt::format("{}.processors[{}]", where, i), pp, depth + 1));
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
    return Status::Unimplemented(
        "{}: post-processor type '{}' is not supported (supported: TemplateProcessing, "
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
      if (ids == st.end() || !ids->is_array())
        return Status::InvalidArgument("{}.special_tokens['{}'].ids is missing", where, name);
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
  GPUOPT_RETURN_IF_ERROR(parse_post_into(j, where, pp, 0));
  return pp;
}

}  // namespace gpuopt::llm::tok
