#include "llm/tok_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

// Oniguruma's Unicode \s is exactly White_Space; PCRE2's (UCP) adds U+180E. Spelling the class
// out keeps the two engines' splits identical.
constexpr const char* kSpaceClass = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pin_whitespace(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kSpaceClass) : fmt::format("[{}]", kSpaceClass);
      } else if (n == 'S' && !in_class) {
        out += fmt::format("[^{}]", kSpaceClass);
      } else {
        out += c;
        out += n;
      }
      ++i;
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
  std::string p = pin_whitespace(pattern);
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

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

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
