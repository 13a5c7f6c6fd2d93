// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}) as `tokenizers` applies it to
// one pre-tokenized word: characters (with continuing_subword_prefix / end_of_word_suffix), byte
// fallback to <0xXX> tokens, unk (fused or not), then merges by rank from a priority queue;
// ignore_merges takes a word that is itself a token whole. Results are cached per word.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "llm/tok_model.h"

namespace gpuopt::llm::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// tokenizer.json's "model"."vocab" (token -> id) into `vocab`, and id -> token (`tokens`, with
// `has_id` marking the ids in use); ids must be non-negative int32 and not far beyond the count.
Status read_vocab(const nlohmann::json& model, Vocab* vocab, std::vector<std::string>* tokens,
                  std::vector<bool>* has_id);

class BpeModel final : public Model {
 public:
  // `model` is tokenizer.json's "model" object; errors name what is wrong (the caller adds the file).
  static Result<std::unique_ptr<BpeModel>> from_json(const nlohmann::json& model);

  // Appends the ids of one word (a pre-tokenizer split, non-empty or not).
  void tokenize(std::string_view word, std::vector<int64_t>& out) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int64_t id) const override;
  int64_t max_id() const override { return static_cast<int64_t>(vocab_r_.size()) - 1; }
  size_t size() const { return vocab_.size(); }

 private:
  void tokenize_merged(std::string_view word, std::vector<int64_t>& out) const;  // cached merges
  void tokenize_long(std::string_view word, std::vector<int64_t>& out) const;
  void merge_word(std::string_view w, std::vector<int32_t>& ids) const;
  const std::vector<uint64_t>& inner_pairs() const;

  Vocab vocab_;
  std::vector<std::string> vocab_r_;
  std::vector<bool> has_id_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xXX> tokens (-1 when missing)
  bool all_bytes_ = false;

  // Adjacent character pairs inside tokens that merges produce (sorted): between two characters
  // that are tokens and form no such pair, no merge ever crosses, so a long word is cut there.
  mutable std::once_flag inner_once_;
  mutable std::vector<uint64_t> inner_pairs_;

  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace gpuopt::llm::tok
