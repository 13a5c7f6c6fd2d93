// Hugging Face `tokenizer.json` (the `tokenizers` library's format): byte-level BPE (GPT-2,
// Llama-3, Qwen), SentencePiece-style BPE (Llama-2, Mistral: Metaspace, byte fallback) and WordPiece
// (BERT and the encoders built on it: BertNormalizer, BertPreTokenizer, [CLS]/[SEP]), with the
// normalizers, pre-tokenizers, decoders and added/special tokens those files use. Ids equal the
// `tokenizers` library's.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file(dir / "tokenizer.json"));
//   std::vector<int64_t> ids = tok->encode("Hello world", /*add_special_tokens=*/true);
//   IncrementalDecoder dec(*tok);
//   for (int64_t id : ids) fmt::print("{}", dec.push(id));   // never half a UTF-8 character
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuopt::llm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  static Result<std::unique_ptr<Tokenizer>> from_file(const std::filesystem::path& path);
  static Result<std::unique_ptr<Tokenizer>> from_json(const std::string& json_text, const std::string& where);
  // add_special_tokens: the post-processor's BOS/EOS (TemplateProcessing / ByteLevel), as
  // `tokenizers`' encode(text, add_special_tokens=...).
  virtual std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // skip_special_tokens as in `tokenizers`' decode.
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const = 0;
  virtual int64_t vocab_size() const = 0;  // including added tokens
  virtual std::optional<int64_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int64_t id) const = 0;
  virtual bool is_special(int64_t id) const = 0;
};

// Streams text as ids arrive: push() returns the newly completed text (possibly empty), holding
// back bytes of an unfinished UTF-8 character and pieces whose decoding depends on what follows
// (e.g. Metaspace's leading space). flush() returns whatever is held. The pieces concatenated
// equal decode(all ids); push() returns what `tokenizers`' DecodeStream.step returns (a window of
// ids: the text of the ids before the window is never decoded again, so streaming stays linear).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens = true);
  std::string push(int64_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int64_t> ids_;  // the window: ids_[0, prefix_index_) decode to prefix_
  std::string prefix_;
  size_t prefix_index_ = 0;
};

}  // namespace gpuopt::llm
