#include "llm/tok_added.h"

#include <algorithm>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

// The last character of s (or an invalid byte, which is no word character and no space).
Utf8Step last_char(std::string_view s) {
  size_t k = s.size() - 1;
  while (k > 0 && s.size() - k < 4 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  Utf8Step st = utf8_step(s, k);
  if (!st.valid || k + st.len != s.size()) return {};
  return st;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  Utf8Step st = last_char(s);
  return st.valid && is_word_char(st.cp);
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  Utf8Step st = utf8_step(s, 0);
  return st.valid && is_word_char(st.cp);
}

// Start of the whitespace run that ends s (regex \s*$).
size_t space_leftmost_at_end(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    std::string_view head = s.substr(0, e);
    Utf8Step st = last_char(head);
    if (!st.valid || !is_whitespace(st.cp)) break;
    e -= st.len;
  }
  return e;
}

// Length of the whitespace run that starts s (regex ^\s*).
size_t space_rightmost_at_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    Utf8Step st = utf8_step(s, i);
    if (!st.valid || !is_whitespace(st.cp)) break;
    i += st.len;
  }
  return i;
}

}  // namespace

void AddedMatcher::add(std::string_view pattern, size_t token_index) {
  if (pattern.empty()) return;
  uint32_t node = 0;
  for (unsigned char c : pattern) {
    uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      nodes_.emplace_back();
      it = edges_.emplace(key, static_cast<uint32_t>(nodes_.size() - 1)).first;
    }
    node = it->second;
  }
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  if (nodes_[node].token < 0) nodes_[node].token = static_cast<int64_t>(token_index);  // the first one wins
}

std::vector<Split> AddedMatcher::split(std::string_view text, const std::vector<AddedToken>& tokens) const {
  std::vector<Split> out;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // The longest pattern starting at pos.
    int64_t best = -1;
    size_t best_len = 0;
    uint32_t node = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[k]));
      if (it == edges_.end()) break;
      node = it->second;
      if (nodes_[node].token >= 0) best = nodes_[node].token, best_len = k + 1 - pos;
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + best_len;
    pos = stop;  // the matcher goes on after the raw match, whatever lstrip/rstrip take
    const AddedToken& tok = tokens[static_cast<size_t>(best)];
    if (tok.single_word) {
      bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(space_leftmost_at_end(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += space_rightmost_at_start(text.substr(stop));
    start = std::max(start, start_offset);  // an rstrip before may have taken this match's start
    if (stop <= start) continue;
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace gpuopt::llm::tok
