#include "llm/tok_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

// Oniguruma's Unicode \s is exactly White_Space; PCRE2's (UCP) adds U+180E. Spelling the class
// out keeps the two engines' splits identical.
constexpr std::string_view kSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
// Letters and numbers of Unicode 15.0-16.0, which `tokenizers`' Oniguruma knows and Debian 12's
// PCRE2 10.42 (Unicode 14) does not: every code point where the two disagree on \p{L} or \p{N}
// (none the other way), found by running both over all of Unicode.
constexpr std::string_view kNewLetters =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65})"
    R"(\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B}\x{1138E})"
    R"(\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10})"
    R"(\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D})"
    R"(\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D})"
    R"(\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr std::string_view kNewNumbers =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59}\x{16130}-\x{16139})"
    R"(\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

// Rewrites \s, \S, \p{L}, \p{N}, \P{L}, \P{N} to the classes above (inside a [...] class: their
// members; \S and \P inside a class are left as PCRE2 reads them).
std::string port_pattern(const std::string& p) {
  struct Rule {
    std::string_view from, members;
    bool negated;
  };
  const std::string letters = fmt::format(R"(\p{{L}}{})", kNewLetters);
  const std::string numbers = fmt::format(R"(\p{{N}}{})", kNewNumbers);
  const Rule rules[] = {{R"(\s)", kSpace, false},    {R"(\S)", kSpace, true},      {R"(\p{L})", letters, false},
                        {R"(\P{L})", letters, true}, {R"(\p{N})", numbers, false}, {R"(\P{N})", numbers, true}};
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const Rule* hit = nullptr;
      for (const Rule& r : rules) {
        if (p.compare(i, r.from.size(), r.from) == 0 && !(in_class && r.negated)) hit = &r;
      }
      if (hit) {
        if (in_class)
          out.append(hit->members);
        else
          out += fmt::format("[{}{}]", hit->negated ? "^" : "", hit->members);
        i += hit->from.size() - 1;
      } else {
        out += c;
        out += p[++i];
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after '[' is a literal member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct JitStack {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  JitStack() {
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    if (stack && ctx) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~JitStack() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  std::string p = port_pattern(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return Status::InvalidArgument("regex '{}': {} at offset {}", pattern, reinterpret_cast<const char*>(buf),
                                   static_cast<size_t>(off));
  }
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = pattern;
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  thread_local JitStack jit;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  if (!md) return out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, md, jit_ ? jit.ctx : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // a huge run: the interpreter keeps its frames on the heap
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) break;  // no more matches (or a match limit hit: the rest stays one gap)
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {  // an empty match: go on one character later, as Oniguruma's search loop does
      if (e >= text.size()) break;
      pos = e + utf8_step(text, e).len;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<std::pair<size_t, size_t>> find_literal(std::string_view text, std::string_view literal) {
  std::vector<std::pair<size_t, size_t>> out;
  if (literal.empty()) return out;
  for (size_t pos = text.find(literal); pos != std::string_view::npos; pos = text.find(literal, pos + literal.size())) {
    out.emplace_back(pos, pos + literal.size());
  }
  return out;
}

}  // namespace gpuopt::llm::tok
