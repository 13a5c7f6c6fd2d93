#include "llm/tok_bpe.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <mutex>
#include <queue>

#include "llm/tok_unicode.h"

namespace gpuopt::llm::tok {
namespace {

using json = nlohmann::json;

// `tokenizers` caches words shorter than this, up to kCacheCapacity of them.
constexpr size_t kCacheMaxWord = 256;
constexpr size_t kCacheCapacity = 10000;

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

Result<std::string> opt_string(const json& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Status::InvalidArgument("model.{} is not a string", key);
  return it->get<std::string>();
}

bool opt_bool(const json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

Status read_vocab(const json& m, Vocab* vocab, std::vector<std::string>* tokens, std::vector<bool>* has_id) {
  auto v = m.find("vocab");
  if (v == m.end() || !v->is_object()) return Status::InvalidArgument("model.vocab is missing or not an object");
  int64_t max_id = -1;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX) {
      return Status::InvalidArgument("model.vocab['{}'] is not a token id (a non-negative integer)", it.key());
    }
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  if (max_id >= static_cast<int64_t>(v->size()) * 4 + 1024) {
    return Status::InvalidArgument("model.vocab: id {} is far beyond the {} tokens", max_id, v->size());
  }
  tokens->resize(static_cast<size_t>(max_id + 1));
  has_id->assign(static_cast<size_t>(max_id + 1), false);
  for (auto it = v->begin(); it != v->end(); ++it) {
    auto id = it.value().get<int32_t>();
    vocab->emplace(it.key(), id);
    (*tokens)[static_cast<size_t>(id)] = it.key();
    (*has_id)[static_cast<size_t>(id)] = true;
  }
  return Status::Ok();
}

Result<std::unique_ptr<BpeModel>> BpeModel::from_json(const json& m) {
  auto bpe = std::make_unique<BpeModel>();
  GPUOPT_RETURN_IF_ERROR(read_vocab(m, &bpe->vocab_, &bpe->vocab_r_, &bpe->has_id_));

  if (auto d = m.find("dropout"); d != m.end() && !d->is_null()) {
    if (!d->is_number()) return Status::InvalidArgument("model.dropout is not a number");
    if (d->get<double>() > 0.0) {
      return Status::Unimplemented("BPE dropout {} (random merges; only deterministic BPE is supported)",
                                   d->get<double>());
    }
  }
  GPUOPT_ASSIGN_OR_RETURN(std::string unk, opt_string(m, "unk_token"));
  if (!unk.empty()) {
    if (auto id = bpe->token_to_id(unk)) bpe->unk_id_ = *id;
  }
  GPUOPT_ASSIGN_OR_RETURN(bpe->prefix_, opt_string(m, "continuing_subword_prefix"));
  GPUOPT_ASSIGN_OR_RETURN(bpe->suffix_, opt_string(m, "end_of_word_suffix"));
  bpe->fuse_unk_ = opt_bool(m, "fuse_unk");
  bpe->byte_fallback_ = opt_bool(m, "byte_fallback");
  bpe->ignore_merges_ = opt_bool(m, "ignore_merges");
  for (int b = 0; b < 256; ++b) {
    auto id = bpe->token_to_id(fmt::format("<0x{:02X}>", b));
    bpe->byte_ids_[b] = id ? *id : -1;
  }

  auto ms = m.find("merges");
  if (ms == m.end() || ms->is_null()) return Status::InvalidArgument("model.merges is missing");
  if (!ms->is_array()) return Status::InvalidArgument("model.merges is not a list");
  bpe->merges_.reserve(ms->size());
  int32_t rank = 0;
  for (const auto& e : *ms) {
    std::string a, b;
    if (e.is_string()) {  // the older "a b" form
      const auto& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) return Status::InvalidArgument("model.merges[{}] '{}' is not 'a b'", rank, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return Status::InvalidArgument("model.merges[{}] is neither 'a b' nor [a, b]", rank);
    }
    auto ia = bpe->token_to_id(a), ib = bpe->token_to_id(b);
    if (!ia) return Status::InvalidArgument("model.merges[{}]: '{}' is not in the vocab", rank, a);
    if (!ib) return Status::InvalidArgument("model.merges[{}]: '{}' is not in the vocab", rank, b);
    size_t cut = std::min(bpe->prefix_.size(), b.size());
    std::string merged = a + b.substr(cut);
    auto im = bpe->token_to_id(merged);
    if (!im)
      return Status::InvalidArgument("model.merges[{}]: the merged token '{}' is not in the vocab", rank, merged);
    bpe->merges_[pair_key(*ia, *ib)] = {rank, *im};
    ++rank;
  }
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(vocab_r_.size()) || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &vocab_r_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() >= kCacheMaxWord && prefix_.empty() && suffix_.empty()) {
    tokenize_long(word, out);
    return;
  }
  tokenize_merged(word, out);
}

void BpeModel::tokenize_merged(std::string_view word, std::vector<int64_t>& out) const {
  const bool cacheable = word.size() < kCacheMaxWord;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(ids));
  }
}

namespace {
uint64_t cp_pair(char32_t a, char32_t b) {
  return (static_cast<uint64_t>(a) << 21) | b;
}
}  // namespace

const std::vector<uint64_t>& BpeModel::inner_pairs() const {
  std::call_once(inner_once_, [this] {
    std::vector<bool> produced(vocab_r_.size(), false);
    for (const auto& [key, m] : merges_) produced[static_cast<size_t>(m.second)] = true;
    for (size_t id = 0; id < produced.size(); ++id) {
      if (!produced[id]) continue;
      const std::string& t = vocab_r_[id];
      char32_t prev = 0;
      for (size_t i = 0; i < t.size();) {
        Utf8Step st = utf8_step(t, i);
        if (i > 0) inner_pairs_.push_back(cp_pair(prev, st.cp));
        prev = st.cp;
        i += st.len;
      }
    }
    std::sort(inner_pairs_.begin(), inner_pairs_.end());
    inner_pairs_.erase(std::unique(inner_pairs_.begin(), inner_pairs_.end()), inner_pairs_.end());
  });
  return inner_pairs_;
}

// A long word (a whole Llama-2 prompt is one) cut where no merge can cross: the pieces merge
// exactly as the whole would, and they are short, so the word cache serves them.
void BpeModel::tokenize_long(std::string_view word, std::vector<int64_t>& out) const {
  const auto& pairs = inner_pairs();
  size_t seg = 0;
  char32_t prev = 0;
  bool prev_token = false;
  for (size_t i = 0; i < word.size();) {
    Utf8Step st = utf8_step(word, i);
    bool is_token = st.valid && vocab_.find(word.substr(i, st.len)) != vocab_.end();
    if (i > seg && prev_token && is_token && !std::binary_search(pairs.begin(), pairs.end(), cp_pair(prev, st.cp))) {
      tokenize_merged(word.substr(seg, i - seg), out);
      seg = i;
    }
    prev = st.cp;
    prev_token = is_token;
    i += st.len;
  }
  tokenize_merged(word.substr(seg), out);
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(sym.size());
    if (n > 0) sym.back().next = n;
    sym.push_back({id, n - 1, -1, true});
  };
  int32_t pending_unk = -1;  // an unk not yet added (fuse_unk joins a run of them)
  std::string piece;
  for (size_t i = 0; i < w.size();) {
    // A character; an invalid UTF-8 subpart counts as one (it is never in the vocab).
    size_t len = utf8_step(w, i).len;
    bool first = i == 0, last = i + len >= w.size();
    piece.clear();
    if (!first) piece += prefix_;
    piece.append(w.substr(i, len));
    if (last) piece += suffix_;
    i += len;
    if (auto id = token_to_id(piece)) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : piece) add(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

  struct Merge {
    int32_t rank, pos, new_id;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::vector<Merge> initial;
  for (size_t k = 0; k + 1 < sym.size(); ++k) {
    if (auto* m = lookup(sym[k].id, sym[k + 1].id)) initial.push_back({m->first, static_cast<int32_t>(k), m->second});
  }
  std::priority_queue<Merge, std::vector<Merge>, std::greater<>> queue(std::greater<>(), std::move(initial));
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol& cur = sym[static_cast<size_t>(top.pos)];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(cur.next)];
    const auto* m = lookup(cur.id, right.id);
    if (!m || m->second != top.new_id) continue;  // a stale entry: one side merged since
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (auto* p = lookup(sym[static_cast<size_t>(cur.prev)].id, cur.id)) queue.push({p->first, cur.prev, p->second});
    }
    if (cur.next >= 0) {
      if (auto* n = lookup(cur.id, sym[static_cast<size_t>(cur.next)].id)) queue.push({n->first, top.pos, n->second});
    }
  }
  for (const Symbol& s : sym) {
    if (s.alive) ids.push_back(s.id);
  }
}

}  // namespace gpuopt::llm::tok
