// The scheduler's step: decodes, running prefills, then admissions, preempting under KV pressure.
#include "llm/scheduler.h"

#include <algorithm>

#include "core/status.h"

namespace gpuopt::llm {

Scheduler::Scheduler(const SchedulerOptions& opts)
    : opts_(opts), alloc_(opts.num_blocks), cache_(alloc_, std::max(1, opts.block_size), opts.enable_prefix_caching) {
  GPUOPT_ASSERT(opts.block_size > 0 && opts.max_num_seqs > 0 && opts.max_num_batched_tokens > 0);
}

Sequence* Scheduler::add(uint64_t id, std::vector<int64_t> prompt, int64_t max_tokens) {
  GPUOPT_ASSERT(!seqs_.count(id), "scheduler: sequence {} added twice", id);
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->prompt = std::move(prompt);
  s->max_tokens = max_tokens;
  Sequence* p = s.get();
  seqs_.emplace(id, std::move(s));
  waiting_.push_back(p);
  return p;
}

Sequence* Scheduler::find(uint64_t id) {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

double Scheduler::kv_usage() const {
  return opts_.num_blocks > 0 ? static_cast<double>(cache_.num_used()) / opts_.num_blocks : 0.0;
}

void Scheduler::release(Sequence* seq) {
  cache_.release(seq->table);
  seq->block_hashes.clear();
  seq->num_computed = 0;
}

void Scheduler::preempt(Sequence* victim, Step& step) {
  release(victim);
  victim->running = false;
  ++victim->num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  ++preemptions_;
  step.preempted.push_back(victim->id);
}

bool Scheduler::reserve(Sequence* seq, int64_t tokens, Step& step, bool allow_self) {
  while (!cache_.grow(seq->table, tokens)) {
    // The most recently admitted running sequence that is not in this step yet.
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend() && !victim; ++it) {
      const bool scheduled =
          std::any_of(step.seqs.begin(), step.seqs.end(), [&](const ScheduledSeq& q) { return q.seq == *it; });
      if (!scheduled) victim = *it;
    }
    if (!victim || victim == seq) {
      if (victim == seq && allow_self) preempt(seq, step);
      return false;
    }
    preempt(victim, step);
  }
  return true;
}

Step Scheduler::schedule() {
  Step step;
  int64_t budget = opts_.max_num_batched_tokens;
  const std::vector<Sequence*> running = running_;  // preemption edits running_

  // Decodes (and prefills down to their last token): one token each, oldest first.
  for (Sequence* s : running) {
    if (budget <= 0) break;
    if (!s->running || s->length() - s->num_computed != 1) continue;
    if (!reserve(s, s->num_computed + 1, step, /*allow_self=*/true)) continue;
    step.seqs.push_back({s, s->num_computed, 1, true});
    budget -= 1;
  }
  // Running sequences still in their prompt (or a recomputation): a chunk each.
  for (Sequence* s : running) {
    if (budget <= 0) break;
    if (!s->running || s->length() - s->num_computed <= 1) continue;
    int64_t chunk = std::min(budget, s->length() - s->num_computed);
    if (!reserve(s, s->num_computed + chunk, step, /*allow_self=*/false)) {
      // What the blocks it can still get hold; the rest waits for a later step.
      const int64_t bs = opts_.block_size;
      const int64_t cover = (static_cast<int64_t>(s->table.size()) + cache_.num_available()) * bs - s->num_computed;
      chunk = std::min(chunk, cover);
      if (chunk <= 0 || !cache_.grow(s->table, s->num_computed + chunk)) continue;
    }
    step.seqs.push_back({s, s->num_computed, static_cast<int32_t>(chunk), s->num_computed + chunk == s->length()});
    budget -= chunk;
  }
  // Admissions, first come first served.
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < opts_.max_num_seqs) {
    Sequence* s = waiting_.front();
    GPUOPT_ASSERT(s->table.empty() && s->num_computed == 0);
    s->table = cache_.match_fn(
        s->length(), [s](int64_t i) { return s->token(i); }, &s->block_hashes);
    const int64_t matched = static_cast<int64_t>(s->table.size()) * opts_.block_size;
    // Blocks for the whole remaining prompt now, so an admitted prefill is not starved of them.
    if (blocks_for(s->length()) - static_cast<int64_t>(s->table.size()) > cache_.num_available()) {
      release(s);
      break;
    }
    waiting_.pop_front();
    const int64_t chunk = std::min(budget, s->length() - matched);
    const bool grown = cache_.grow(s->table, matched + chunk);
    GPUOPT_ASSERT(grown);
    s->num_computed = matched;
    s->running = true;
    s->admitted_at = next_admission_++;
    running_.push_back(s);
    if (!s->ever_admitted) {
      s->ever_admitted = true;
      s->cached_prompt_tokens = std::min<int64_t>(matched, static_cast<int64_t>(s->prompt.size()));
      cache_.record(static_cast<int64_t>(s->prompt.size()), s->cached_prompt_tokens);
      step.admitted.push_back(s->id);
    }
    step.seqs.push_back({s, matched, static_cast<int32_t>(chunk), matched + chunk == s->length()});
    budget -= chunk;
  }
  step.num_tokens = opts_.max_num_batched_tokens - budget;
  return step;
}

void Scheduler::computed(const Step& step) {
  for (const ScheduledSeq& q : step.seqs) {
    Sequence* s = q.seq;
    s->num_computed = q.start_pos + q.num_tokens;
    cache_.insert_fn(s->block_hashes, s->table, s->num_computed / opts_.block_size,
                     [s](int64_t i) { return s->token(i); });
  }
}

void Scheduler::finish(uint64_t id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence* s = it->second.get();
  if (s->running) {
    running_.erase(std::find(running_.begin(), running_.end(), s));
  } else {
    const auto w = std::find(waiting_.begin(), waiting_.end(), s);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  release(s);
  seqs_.erase(it);
}

}  // namespace gpuopt::llm
