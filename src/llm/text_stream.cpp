// TextStream: the finish rules and the stop-string hold-back of one sequence.
#include "llm/text_stream.h"

#include <algorithm>

namespace gpuopt::llm {

int64_t max_new_for(const LlmConfig& c, int64_t prompt_len, const SamplingParams& p) {
  return std::max<int64_t>(0, std::min<int64_t>(p.max_new_tokens, c.max_position - prompt_len + 1));
}

Status check_request(const LlmConfig& c, const std::vector<int64_t>& prompt, const SamplingParams& p,
                     const Tokenizer* tokenizer, const std::string& who) {
  if (prompt.empty()) return Status::InvalidArgument("{} is empty: give at least one token", who);
  if (static_cast<int64_t>(prompt.size()) > c.max_position)
    return Status::InvalidArgument("{} has {} tokens, longer than the model's context of {} (max_position_embeddings)",
                                   who, prompt.size(), c.max_position);
  for (int64_t t : prompt)
    if (t < 0 || t >= c.vocab_size)
      return Status::InvalidArgument("{}: token id {} is not in the vocabulary (0..{})", who, t, c.vocab_size - 1);
  if (!p.stop.empty() && !tokenizer) return Status::InvalidArgument("stop strings need the model's tokenizer.json");
  if (p.max_new_tokens < 1) return Status::InvalidArgument("max_new_tokens must be >= 1");
  return Status::Ok();
}

TextStream::TextStream(const LlmConfig& c, const SamplingParams& p, const Tokenizer* tokenizer,
                       bool skip_special_tokens, int64_t max_new)
    : c_(c), p_(p), max_new_(max_new) {
  if (tokenizer) decoder_ = std::make_unique<IncrementalDecoder>(*tokenizer, skip_special_tokens);
  for (const std::string& stop : p.stop)
    if (!stop.empty()) holdback_ = std::max(holdback_, stop.size() - 1);
}

bool TextStream::push(int64_t tok, std::string* ready) {
  if (finished_) return true;
  ++num_tokens_;
  const auto& eos_ids = c_.eos_token_ids;
  const bool eos = !p_.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), tok) != eos_ids.end();
  const bool stop_id = std::find(p_.stop_token_ids.begin(), p_.stop_token_ids.end(), tok) != p_.stop_token_ids.end();
  if (eos || stop_id) {
    finished_ = true;
    finish_reason_ = "stop";
  } else if (num_tokens_ >= max_new_) {
    finished_ = true;
    finish_reason_ = "length";
  }
  if (decoder_) {
    std::string piece;
    if (!eos && !stop_id) piece = decoder_->push(tok);
    if (finished_) piece += decoder_->flush();
    append_text(piece, ready);
  }
  return finished_;
}

void TextStream::finish(const std::string& reason, std::string* ready) {
  if (finished_) return;
  finished_ = true;
  finish_reason_ = reason;
  if (decoder_) append_text(decoder_->flush(), ready);
}

void TextStream::append_text(const std::string& piece, std::string* ready) {
  const size_t before = text_.size();
  text_ += piece;
  // A stop string ends the text where it begins (searched only where new text could complete one).
  const size_t from = before >= holdback_ ? before - holdback_ : 0;
  size_t cut = std::string::npos;
  for (const std::string& stop : p_.stop)
    if (!stop.empty()) cut = std::min(cut, text_.find(stop, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    if (!finished_ || finish_reason_ == "length") finish_reason_ = "stop";
    finished_ = true;
  }
  const size_t ready_at = finished_ ? text_.size() : (text_.size() > holdback_ ? text_.size() - holdback_ : 0);
  if (ready_at > emitted_) {
    if (ready) ready->append(text_, emitted_, ready_at - emitted_);
    emitted_ = ready_at;
  }
}

}  // namespace gpuopt::llm
