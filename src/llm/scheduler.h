// The serving engine's scheduling policy at token granularity, with no runner in it: which
// sequences run in the next step and with how many tokens, under a token budget
// (max_num_batched_tokens) and a sequence budget (max_num_seqs), against the KV blocks.
//
// Each step: first one decode token for every running sequence past its prompt (oldest admitted
// first), then prefill chunks: of running sequences still in their prompt, then of waiting ones in
// arrival order (FCFS: the head blocks the rest), each admitted only when the blocks for its whole
// remaining prompt are free or evictable. A running sequence that cannot get a block for its next
// token preempts the most recently admitted running sequence not yet in the step (itself when it
// is the last): its blocks are freed and it goes back to the front of the waiting queue, to be
// recomputed from prompt + tokens so far (its full blocks are often still in the prefix cache).
//
//   Scheduler s(so);
//   Sequence* q = s.add(id, prompt, /*max_tokens=*/prompt.size() + max_new - 1);
//   for (;;) {
//     Step st = s.schedule();                 // st.seqs: what to run; st.preempted: ids requeued
//     ... run st on the runner ...
//     s.computed(st);                         // the step's K/V are written
//     s.append(q, token);                     // for each sampling sequence
//     s.finish(id);                           // when a sequence ends (frees its blocks)
//   }
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "llm/kv_cache.h"
#include "llm/prefix_cache.h"

namespace gpuopt::llm {

struct SchedulerOptions {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int block_size = kDefaultBlockSize;
  int32_t num_blocks = 0;
  bool enable_prefix_caching = true;
};

struct Sequence {
  uint64_t id = 0;
  std::vector<int64_t> prompt;
  std::vector<int64_t> output;  // sampled so far (the last one is not in the cache yet)
  int64_t max_tokens = 0;       // most tokens whose K/V it ever writes (prompt + max_new - 1)
  int64_t num_computed = 0;     // tokens whose K/V are in its blocks
  std::vector<int32_t> table;
  std::vector<uint64_t> block_hashes;  // of its full blocks, for the prefix cache
  int64_t cached_prompt_tokens = 0;    // found in the prefix cache at its first admission
  int num_preemptions = 0;
  bool running = false;
  bool ever_admitted = false;
  uint64_t admitted_at = 0;  // admission order (the preemption victim is the largest)

  int64_t length() const { return static_cast<int64_t>(prompt.size() + output.size()); }
  int64_t token(int64_t i) const {
    const auto p = static_cast<int64_t>(prompt.size());
    return i < p ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - p)];
  }
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t start_pos = 0;
  int32_t num_tokens = 0;
  bool sample = false;  // the chunk ends at the sequence's last token: a new token comes out
};

struct Step {
  std::vector<ScheduledSeq> seqs;   // decodes first, then prefill chunks
  std::vector<uint64_t> preempted;  // sequences requeued while making this step
  std::vector<uint64_t> admitted;   // sequences admitted for the first time in this step
  int64_t num_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& opts);
  const SchedulerOptions& options() const { return opts_; }

  // Blocks a sequence writing `max_tokens` tokens needs at most; add() requires it to be at most
  // num_blocks (check with fits()).
  int64_t blocks_for(int64_t max_tokens) const { return (max_tokens + opts_.block_size - 1) / opts_.block_size; }
  bool fits(int64_t max_tokens) const { return blocks_for(max_tokens) <= opts_.num_blocks; }

  // Queues a new sequence at the back. Ids must be unique among live sequences.
  Sequence* add(uint64_t id, std::vector<int64_t> prompt, int64_t max_tokens);
  Sequence* find(uint64_t id);
  Step schedule();
  // After the runner wrote the step's K/V: positions advance, full blocks enter the prefix cache.
  void computed(const Step& step);
  void append(Sequence* seq, int64_t token) { seq->output.push_back(token); }
  // Removes a sequence (running or waiting) and frees its blocks; unknown ids are ignored.
  void finish(uint64_t id);

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_preemptions() const { return preemptions_; }
  double kv_usage() const;  // blocks held by sequences / all blocks
  const PrefixCache& cache() const { return cache_; }

 private:
  // Makes room for `seq` to cover `tokens` tokens, preempting later-admitted unscheduled running
  // sequences; false when even that is not enough (or `seq` itself was preempted).
  bool reserve(Sequence* seq, int64_t tokens, Step& step, bool allow_self);
  void preempt(Sequence* victim, Step& step);
  void release(Sequence* seq);

  SchedulerOptions opts_;
  BlockAllocator alloc_;
  PrefixCache cache_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;
  uint64_t next_admission_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace gpuopt::llm
