// PCRE2 (UTF + Unicode properties, JIT) for the tokenizer's pre-tokenizer and Replace patterns.
// `tokenizers` uses Oniguruma; the patterns tokenizer.json files carry (GPT-2's, Llama-3's, Qwen's)
// mean the same in PCRE2 once \s, \p{L} and \p{N} are pinned to Oniguruma's sets (tok_regex.cpp).
//
//   GPUOPT_ASSIGN_OR_RETURN(auto re, Regex::compile(R"(\p{L}+)"));
//   for (auto [b, e] : re->find_all(text)) ...   // non-overlapping, left to right
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gpuopt::llm::tok {

class Regex {
 public:
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Byte offsets [begin, end) of each match. Invalid UTF-8 in `text` never matches (it is left in
  // the gaps between matches). Thread-safe.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// The byte offsets of every non-overlapping occurrence of `literal` (a String pattern).
std::vector<std::pair<size_t, size_t>> find_literal(std::string_view text, std::string_view literal);

}  // namespace gpuopt::llm::tok
