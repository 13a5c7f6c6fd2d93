// The scheduler's policy alone (no runner): token and sequence budgets, chunked prefill, admission
// by free blocks (first come first served), preemption of the most recently admitted sequence and
// its recomputation, and the blocks all coming back.
#include "llm/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gpuopt::llm {
namespace {

SchedulerOptions opts(int budget, int max_seqs, int block_size, int32_t blocks, bool prefix = false) {
  SchedulerOptions o;
  o.max_num_batched_tokens = budget;
  o.max_num_seqs = max_seqs;
  o.block_size = block_size;
  o.num_blocks = blocks;
  o.enable_prefix_caching = prefix;
  return o;
}

std::vector<int64_t> tokens(int n, int64_t first = 1) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// (id, start, n, sample) of each entry, in order.
using Plan = std::vector<std::tuple<uint64_t, int64_t, int32_t, bool>>;
Plan plan(const Step& s) {
  Plan p;
  for (const ScheduledSeq& q : s.seqs) p.emplace_back(q.seq->id, q.start_pos, q.num_tokens, q.sample);
  return p;
}

// Runs the step: K/V written, each sampling sequence gets token 7.
void run(Scheduler& s, const Step& st) {
  s.computed(st);
  for (const ScheduledSeq& q : st.seqs)
    if (q.sample) s.append(q.seq, 7);
}

TEST(Scheduler, DecodesFirstThenChunkedPrefillsUnderTheTokenBudget) {
  Scheduler s(opts(8, 16, 4, 100));
  s.add(1, tokens(10), 20);
  s.add(2, tokens(3), 20);
  s.add(3, tokens(5), 20);
  Step st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 0, 8, false}}));  // the budget ends with the first prompt
  EXPECT_EQ(st.admitted, std::vector<uint64_t>{1});
  EXPECT_EQ(st.num_tokens, 8);
  run(s, st);
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 8, 2, true}, {2, 0, 3, true}, {3, 0, 3, false}}));
  run(s, st);
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 10, 1, true}, {2, 3, 1, true}, {3, 3, 2, true}}));
  run(s, st);
  EXPECT_EQ(s.find(1)->output.size(), 2u);
  EXPECT_EQ(s.find(3)->output.size(), 1u);
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 11, 1, true}, {2, 4, 1, true}, {3, 5, 1, true}}));
  EXPECT_EQ(s.num_running(), 3);
  EXPECT_EQ(s.num_waiting(), 0);
  // Decodes beyond the budget wait for the next step (oldest first).
  Scheduler t(opts(2, 16, 4, 100));
  for (uint64_t id = 1; id <= 3; ++id) t.add(id, tokens(1), 10);
  st = t.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 0, 1, true}, {2, 0, 1, true}}));
  run(t, st);
  st = t.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 1, 1, true}, {2, 1, 1, true}}));
}

TEST(Scheduler, MaxNumSeqsAndFcfsAdmissionByFreeBlocks) {
  Scheduler s(opts(64, 2, 4, 100));
  for (uint64_t id = 1; id <= 3; ++id) s.add(id, tokens(2), 10);
  Step st = s.schedule();
  EXPECT_EQ(st.seqs.size(), 2u);  // max_num_seqs
  EXPECT_EQ(s.num_waiting(), 1);
  run(s, st);
  s.finish(1);
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{2, 2, 1, true}, {3, 0, 2, true}}));

  // 4 blocks of 4: a 10-token prompt takes 3; the next needs 2 and waits, and so does the one
  // behind it although it would fit (first come, first served).
  Scheduler b(opts(64, 16, 4, 4));
  b.add(1, tokens(10), 12);
  b.add(2, tokens(6), 8);
  b.add(3, tokens(1), 1);
  st = b.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 0, 10, true}}));
  EXPECT_DOUBLE_EQ(b.kv_usage(), 0.75);
  run(b, st);
  st = b.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 10, 1, true}}));
  EXPECT_EQ(b.num_waiting(), 2);
  b.finish(1);
  EXPECT_DOUBLE_EQ(b.kv_usage(), 0.0);
  st = b.schedule();
  EXPECT_EQ(plan(st), (Plan{{2, 0, 6, true}, {3, 0, 1, true}}));
  EXPECT_FALSE(b.fits(17));  // 5 blocks
  EXPECT_TRUE(b.fits(16));
}

TEST(Scheduler, PreemptsTheMostRecentlyAdmittedAndRecomputesIt) {
  // 6 blocks of 2 tokens; three 4-token prompts take all of them.
  Scheduler s(opts(64, 16, 2, 6));
  for (uint64_t id = 1; id <= 3; ++id) s.add(id, tokens(4, static_cast<int64_t>(id) * 10), 10);
  Step st = s.schedule();
  EXPECT_EQ(st.seqs.size(), 3u);
  run(s, st);
  EXPECT_DOUBLE_EQ(s.kv_usage(), 1.0);
  // Each decode at position 4 needs a third block: 1 takes 3's two blocks (3 is the most
  // recent), 2 gets the other one.
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 4, 1, true}, {2, 4, 1, true}}));
  EXPECT_EQ(st.preempted, std::vector<uint64_t>{3});
  EXPECT_EQ(s.num_preemptions(), 1);
  EXPECT_EQ(s.num_waiting(), 1);
  Sequence* q3 = s.find(3);
  EXPECT_FALSE(q3->running);
  EXPECT_TRUE(q3->table.empty());
  EXPECT_EQ(q3->output, std::vector<int64_t>{7});  // kept: it is recomputed, not restarted
  run(s, st);
  // Positions 5 fit in the third blocks: no preemption; 3 waits for 3 blocks (5 tokens).
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 5, 1, true}, {2, 5, 1, true}}));
  EXPECT_TRUE(st.preempted.empty());
  run(s, st);
  // Position 6 needs a fourth block each: none is free and 2 is the most recent running one:
  // 1 preempts 2, and 2 is back at the front of the queue, before 3.
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 6, 1, true}}));
  EXPECT_EQ(st.preempted, std::vector<uint64_t>{2});
  run(s, st);
  s.finish(1);
  st = s.schedule();
  // 2 is recomputed from prompt + its 3 tokens (7 tokens, sampling the 4th); 3 from 4 + 1.
  // 3 needs 3 blocks for its 5 tokens but only 2 are left after 2's 4: it waits.
  EXPECT_EQ(plan(st), (Plan{{2, 0, 7, true}}));
  EXPECT_EQ(s.find(2)->token(6), 7);
  EXPECT_EQ(s.find(2)->num_preemptions, 1);
  run(s, st);
  s.finish(2);
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{3, 0, 5, true}}));
  run(s, st);
  s.finish(3);
  EXPECT_DOUBLE_EQ(s.kv_usage(), 0.0);
  EXPECT_FALSE(s.has_work());
}

TEST(Scheduler, TheLastAdmittedPreemptsItselfAndAPrefillTakesWhatBlocksRemain) {
  // 3 blocks of 2: 1 (3 tokens) and 2 (1 token) are admitted; 2 is the most recent.
  Scheduler s(opts(64, 16, 2, 3));
  s.add(1, tokens(3), 6);
  s.add(2, tokens(2), 6);
  Step st = s.schedule();
  EXPECT_EQ(st.seqs.size(), 2u);
  run(s, st);  // 1 holds 2 blocks (3 tokens), 2 holds 1 block (2 tokens), none free
  st = s.schedule();
  // 1's decode at position 3 fits its second block; 2's at position 2 needs a block: it is the
  // most recently admitted running sequence not yet in the step, so it preempts itself.
  EXPECT_EQ(plan(st), (Plan{{1, 3, 1, true}}));
  EXPECT_EQ(st.preempted, std::vector<uint64_t>{2});

  // A running prompt whose next chunk needs more blocks than are free takes a shorter one, and
  // is the victim when an older sequence's decode needs a block.
  Scheduler p(opts(4, 16, 2, 5));
  p.add(1, tokens(2), 8);
  p.add(2, tokens(8), 8);
  st = p.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 0, 2, true}, {2, 0, 2, false}}));
  run(p, st);
  st = p.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 2, 1, true}, {2, 2, 3, false}}));
  run(p, st);
  st = p.schedule();  // 2 would need a fourth block for 3 more tokens: 1 is all that fits
  EXPECT_EQ(plan(st), (Plan{{1, 3, 1, true}, {2, 5, 1, false}}));
  run(p, st);
  st = p.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 4, 1, true}}));
  EXPECT_EQ(st.preempted, std::vector<uint64_t>{2});
  EXPECT_EQ(p.find(2)->num_computed, 0);
}

TEST(Scheduler, PrefixCacheSharesFullPromptBlocksAcrossSequences) {
  Scheduler s(opts(64, 16, 4, 16, /*prefix=*/true));
  s.add(1, tokens(10), 12);
  Step st = s.schedule();
  run(s, st);               // blocks 0 and 1 of sequence 1 are full: cached
  s.add(2, tokens(9), 12);  // shares the two full blocks; the 9th token is computed
  s.add(3, tokens(8), 12);  // 8 tokens: only the first block (its last token must be computed)
  st = s.schedule();
  EXPECT_EQ(plan(st), (Plan{{1, 10, 1, true}, {2, 8, 1, true}, {3, 4, 4, true}}));
  EXPECT_EQ(s.find(2)->cached_prompt_tokens, 8);
  EXPECT_EQ(s.find(3)->cached_prompt_tokens, 4);
  EXPECT_EQ(s.find(2)->table[0], s.find(1)->table[0]);
  EXPECT_EQ(s.find(2)->table[1], s.find(1)->table[1]);
  EXPECT_NE(s.find(2)->table[2], s.find(1)->table[2]);  // never the block still written to
  EXPECT_EQ(s.cache().queries(), 10 + 9 + 8);
  EXPECT_EQ(s.cache().hits(), 8 + 4);
  run(s, st);
  for (uint64_t id = 1; id <= 3; ++id) s.finish(id);
  EXPECT_DOUBLE_EQ(s.kv_usage(), 0.0);  // cached blocks no one uses are not "used"
  EXPECT_GT(s.cache().num_evictable(), 0);
}

}  // namespace
}  // namespace gpuopt::llm
