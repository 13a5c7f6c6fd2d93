// tokenizer.json's "added_tokens" (special tokens like <|begin_of_text|>, and user-added ones),
// found in the text before the model sees it, as `tokenizers`' AddedVocabulary does: the tokens
// with normalized=false in the raw text, the others in each normalized piece; leftmost-longest
// matches, with single_word, lstrip and rstrip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuopt::llm::tok {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  std::string decoded;  // what decode() sees: the normalized form for normalized tokens
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// One split of a text: an added token's id, or a gap of text (id -1) for the model.
struct Split {
  size_t begin, end;
  int64_t id;
};

// Leftmost-longest matching over a byte trie of a set of token strings.
class AddedMatcher {
 public:
  void add(std::string_view pattern, size_t token_index);
  bool empty() const { return nodes_.size() <= 1; }
  // Splits `text` (which covers the whole text, gaps included, no empty gaps).
  std::vector<Split> split(std::string_view text, const std::vector<AddedToken>& tokens) const;

 private:
  struct Node {
    int64_t token = -1;  // index into the tokens, when a pattern ends here
  };
  std::vector<Node> nodes_{1};
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> node
  bool first_byte_[256] = {};
};

}  // namespace gpuopt::llm::tok
