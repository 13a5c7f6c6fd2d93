// The model stage of tokenizer.json ("model": {...}): one pre-tokenized word in, ids out. BPE
// (tok_bpe.h) and WordPiece (tok_wordpiece.h) implement it.
//
//   std::vector<int64_t> ids;
//   model.tokenize("hello", ids);              // appends the word's ids
//   const std::string* s = model.id_to_token(ids[0]);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::llm::tok {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one word (a pre-tokenizer split, non-empty or not).
  virtual void tokenize(std::string_view word, std::vector<int64_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int64_t id) const = 0;  // nullptr when no token has this id
  virtual int64_t max_id() const = 0;
};

}  // namespace gpuopt::llm::tok
