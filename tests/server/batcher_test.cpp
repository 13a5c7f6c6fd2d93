// Dynamic batcher against a recording add_sub backend: batch formation, preferred sizes,
// queue limits, timeouts, priorities, ordering, sequence padding, drain on stop.
#include <gtest/gtest.h>

#include <future>

#include "fake_instance.h"
#include "server/batcher.h"

namespace gpuopt::server {
namespace {

using namespace std::chrono_literals;
using testing::AddSubInstance;
using testing::Recorder;

struct Answer {
  Status status;
  std::vector<Tensor> out;
  Timing timing;
};

struct Harness {
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
  std::unique_ptr<Batcher> batcher;
  std::mutex mu;
  std::vector<uint64_t> completion_order;

  explicit Harness(BatcherOptions o, int instances = 1) {
    o.model_name = "m";
    if (o.inputs.empty()) {
      o.inputs = {{"INPUT0", DType::F32, {-1, 4}, true}, {"INPUT1", DType::F32, {-1, 4}, true}};
      o.outputs = {{"OUTPUT0", DType::F32, {-1, 4}, true}, {"OUTPUT1", DType::F32, {-1, 4}, true}};
    }
    std::vector<std::unique_ptr<ModelInstance>> inst;
    for (int i = 0; i < instances; ++i) inst.push_back(std::make_unique<AddSubInstance>(rec, i));
    batcher = std::make_unique<Batcher>(std::move(o), std::move(inst), stats);
    batcher->start();
  }

  // Request number `id`: rows x 4 values starting at id*100 (a) and 1 (b).
  std::future<Answer> submit(int id, int64_t rows = 1, std::optional<uint32_t> priority = {},
                             std::optional<uint64_t> timeout_us = {}, int64_t len = 4,
                             Status* submit_status = nullptr) {
    auto p = std::make_shared<std::promise<Answer>>();
    BatchRequest r;
    Tensor a = Tensor::empty(DType::F32, {rows, len}), b = Tensor::empty(DType::F32, {rows, len});
    for (int64_t i = 0; i < a.numel(); ++i) {
      a.data<float>()[i] = static_cast<float>(id * 100 + i);
      b.data<float>()[i] = 1.0f;
    }
    r.inputs = {a, b};
    r.priority = priority;
    r.timeout_us = timeout_us;
    r.done = [this, p, id](Result<std::vector<Tensor>> out, const Timing& t) {
      {
        std::lock_guard<std::mutex> lk(mu);
        completion_order.push_back(static_cast<uint64_t>(id));
      }
      Answer a;
      a.status = out.status();
      if (out.ok()) a.out = std::move(out).value();
      a.timing = t;
      p->set_value(std::move(a));
    };
    Status s = batcher->submit(std::move(r));
    if (submit_status) *submit_status = s;
    if (!s.ok()) {
      Answer a;
      a.status = s;
      p->set_value(std::move(a));
    }
    return p->get_future();
  }
};

void expect_add_sub(const Answer& a, int id, int64_t rows = 1, int64_t len = 4) {
  ASSERT_TRUE(a.status.ok()) << a.status.to_string();
  ASSERT_EQ(a.out.size(), 2u);
  ASSERT_EQ(a.out[0].shape(), (Shape{rows, len}));
  for (int64_t i = 0; i < rows * len; ++i) {
    ASSERT_EQ(a.out[0].data<float>()[i], static_cast<float>(id * 100 + i) + 1.0f) << "request " << id;
    ASSERT_EQ(a.out[1].data<float>()[i], static_cast<float>(id * 100 + i) - 1.0f) << "request " << id;
  }
}

BatcherOptions dynamic(int64_t max_batch, uint64_t delay_us, std::vector<int64_t> preferred = {}) {
  BatcherOptions o;
  o.max_batch_size = max_batch;
  o.dynamic.emplace();
  o.dynamic->max_queue_delay_us = delay_us;
  o.dynamic->preferred_batch_size = std::move(preferred);
  return o;
}

TEST(Batcher, WithoutDynamicBatchingEachRequestRunsAlone) {
  BatcherOptions o;
  o.max_batch_size = 8;
  Harness h(o);
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 6; ++i) f.push_back(h.submit(i, 2));
  for (int i = 0; i < 6; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i, 2);
  EXPECT_EQ(h.rec->batch_rows, (std::vector<int64_t>(6, 2)));
}

TEST(Batcher, ConcurrentRequestsAreBatchedAndSplitBack) {
  Harness h(dynamic(8, 200000));
  h.rec->gate_open = false;  // hold the instance so the queue fills
  auto first = h.submit(99);
  ASSERT_TRUE(h.rec->wait_running(1));
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 7; ++i) f.push_back(h.submit(i, i % 2 + 1));  // 1 or 2 rows: 10 rows in all
  while (h.batcher->queued() < 7) std::this_thread::sleep_for(1ms);
  h.rec->open_gate();
  expect_add_sub(first.get(), 99, 1);
  for (int i = 0; i < 7; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i, i % 2 + 1);
  // 10 queued rows (1,2,1,2,1,2,1), max 8: requests are never split, so 7 rows go first
  // (the next request would overflow) and the last 3 after.
  ASSERT_EQ(h.rec->batch_rows, (std::vector<int64_t>{1, 7, 3}));
  auto s = h.stats->snapshot();
  EXPECT_EQ(s.execution_count, 3u);
  EXPECT_EQ(s.inference_count, 11u);
  EXPECT_EQ(s.batch_stats.at(7).compute_infer.count, 1u);
}

TEST(Batcher, PreferredSizeGoesWithoutWaitingForTheDelay) {
  Harness h(dynamic(8, 5000000, {4}));  // 5 s delay: only a preferred size can leave early
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 4; ++i) f.push_back(h.submit(i));
  for (int i = 0; i < 4; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(h.rec->batch_rows, (std::vector<int64_t>{4}));
}

TEST(Batcher, DelayExpiryDispatchesAPartialBatch) {
  Harness h(dynamic(8, 30000));  // 30 ms
  auto t0 = std::chrono::steady_clock::now();
  auto a = h.submit(1), b = h.submit(2);
  expect_add_sub(a.get(), 1);
  expect_add_sub(b.get(), 2);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 25ms);  // waited for more requests...
  EXPECT_LT(took, 2s);    // ...but not forever
  EXPECT_EQ(h.rec->batch_rows, (std::vector<int64_t>{2}));
}

TEST(Batcher, BoundedQueueRejectsWith503) {
  auto o = dynamic(1, 0);
  o.dynamic->default_queue_policy.max_queue_size = 2;
  Harness h(o);
  h.rec->gate_open = false;
  auto running = h.submit(0);
  ASSERT_TRUE(h.rec->wait_running(1));
  Status s1, s2, s3;
  auto q1 = h.submit(1, 1, {}, {}, 4, &s1);
  auto q2 = h.submit(2, 1, {}, {}, 4, &s2);
  auto q3 = h.submit(3, 1, {}, {}, 4, &s3);
  EXPECT_TRUE(s1.ok());
  EXPECT_TRUE(s2.ok());
  ASSERT_FALSE(s3.ok());
  EXPECT_EQ(s3.code(), StatusCode::kUnavailable);
  EXPECT_NE(s3.message().find("maximum queue size"), std::string::npos);
  h.rec->open_gate();
  expect_add_sub(q1.get(), 1);
  expect_add_sub(q2.get(), 2);
}

TEST(Batcher, TimeoutRejectsAndDelayDefers) {
  auto o = dynamic(4, 0);
  o.dynamic->default_queue_policy.default_timeout_us = 20000;  // 20 ms
  Harness h(o);
  h.rec->gate_open = false;
  auto running = h.submit(0);
  ASSERT_TRUE(h.rec->wait_running(1));
  auto late = h.submit(1);
  Answer a = late.get();  // answered while the instance is still blocked
  EXPECT_EQ(a.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(a.status.message().find("timeout"), std::string::npos);
  EXPECT_GE(a.timing.queue_ns, 20000000u);
  h.rec->open_gate();
  expect_add_sub(running.get(), 0);

  auto od = dynamic(4, 0);
  od.dynamic->default_queue_policy.default_timeout_us = 10000;
  od.dynamic->default_queue_policy.timeout_action = TimeoutAction::kDelay;
  Harness d(od);
  d.rec->gate_open = false;
  auto r0 = d.submit(0);
  ASSERT_TRUE(d.rec->wait_running(1));
  auto r1 = d.submit(1);
  std::this_thread::sleep_for(30ms);
  d.rec->open_gate();
  expect_add_sub(r1.get(), 1);  // DELAY: still runs
}

TEST(Batcher, HigherPriorityRunsFirst) {
  auto o = dynamic(1, 0);
  o.dynamic->priority_levels = 2;
  o.dynamic->default_priority_level = 2;
  Harness h(o);
  h.rec->gate_open = false;
  auto r0 = h.submit(0);
  ASSERT_TRUE(h.rec->wait_running(1));
  auto low = h.submit(1, 1, 2u);
  auto low2 = h.submit(2);  // default level 2
  auto high = h.submit(3, 1, 1u);
  while (h.batcher->queued() < 3) std::this_thread::sleep_for(1ms);
  h.rec->open_gate();
  for (auto* f : {&r0, &low, &low2, &high}) ASSERT_TRUE(f->get().status.ok());
  ASSERT_EQ(h.rec->first_values.size(), 4u);
  EXPECT_EQ(h.rec->first_values[1], 300.f);  // request 3 (priority 1) went before 1 and 2
  EXPECT_EQ(h.rec->first_values[2], 100.f);
  Status bad;
  h.submit(4, 1, 3u, {}, 4, &bad);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

TEST(Batcher, PreserveOrderingAcrossInstances) {
  auto o = dynamic(1, 0);
  o.dynamic->preserve_ordering = true;
  Harness h(o, 3);
  h.rec->delay = 5ms;
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 30; ++i) f.push_back(h.submit(i));
  for (int i = 0; i < 30; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i);
  std::vector<uint64_t> want(30);
  for (int i = 0; i < 30; ++i) want[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  EXPECT_EQ(h.completion_order, want);
}

TEST(Batcher, SequencePaddingBucketsAndCutsBack) {
  auto o = dynamic(8, 200000);
  o.padding.axis = 1;
  o.padding.buckets = {4, 8};
  o.inputs = {{"INPUT0", DType::F32, {-1, -1}, true}, {"INPUT1", DType::F32, {-1, -1}, true}};
  o.outputs = o.inputs;
  Harness h(o);
  h.rec->gate_open = false;
  auto first = h.submit(90, 1, {}, {}, 8);
  ASSERT_TRUE(h.rec->wait_running(1));
  // Lengths 2, 3, 4 share bucket 4; length 6 goes to bucket 8.
  auto a = h.submit(1, 1, {}, {}, 2), b = h.submit(2, 2, {}, {}, 3), c = h.submit(3, 1, {}, {}, 4),
       d = h.submit(4, 1, {}, {}, 6);
  while (h.batcher->queued() < 4) std::this_thread::sleep_for(1ms);
  h.rec->open_gate();
  expect_add_sub(a.get(), 1, 1, 2);
  expect_add_sub(b.get(), 2, 2, 3);
  expect_add_sub(c.get(), 3, 1, 4);
  expect_add_sub(d.get(), 4, 1, 6);
  ASSERT_EQ(h.rec->shapes.size(), 3u);
  EXPECT_EQ(h.rec->shapes[1], (Shape{4, 4}));  // 4 rows padded to length 4
  EXPECT_EQ(h.rec->shapes[2], (Shape{1, 8}));
}

TEST(Batcher, StopDrainsEverythingQueued) {
  Harness h(dynamic(2, 100000));
  h.rec->delay = 2ms;
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 20; ++i) f.push_back(h.submit(i));
  h.batcher->stop();
  for (int i = 0; i < 20; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i);
  Status s;
  h.submit(100, 1, {}, {}, 4, &s);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

TEST(Batcher, BackendFailureAnswersEveryRequestOfTheBatch) {
  Harness h(dynamic(4, 50000));
  h.rec->fail = true;
  auto a = h.submit(1), b = h.submit(2);
  for (auto* f : {&a, &b}) {
    Answer x = f->get();
    EXPECT_EQ(x.status.code(), StatusCode::kInternal);
    EXPECT_NE(x.status.message().find("exploded"), std::string::npos);
  }
  Status s;
  h.submit(3, 9, {}, {}, 4, &s);  // 9 rows > max_batch_size 4
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(Batcher, RowBucketsPadBatchesToTheEngineSizesAndCutBack) {
  BatcherOptions o = dynamic(8, 200000);
  o.row_buckets = default_row_buckets(8, {});
  ASSERT_EQ(o.row_buckets, (std::vector<int64_t>{1, 2, 4, 8}));
  Harness h(o);
  h.rec->gate_open = false;
  auto first = h.submit(99, 3);  // 3 rows alone: runs as 4
  ASSERT_TRUE(h.rec->wait_running(1));
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 5; ++i) f.push_back(h.submit(i));  // 5 rows together: run as 8
  while (h.batcher->queued() < 5) std::this_thread::sleep_for(1ms);
  h.rec->open_gate();
  expect_add_sub(first.get(), 99, 3);
  for (int i = 0; i < 5; ++i) {
    Answer a = f[static_cast<size_t>(i)].get();
    expect_add_sub(a, i);
    EXPECT_EQ(a.timing.batch_rows, 5);  // the requests' rows, not the zeros
  }
  EXPECT_EQ(h.rec->batch_rows, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(h.rec->shapes, (std::vector<Shape>{{4, 4}, {8, 4}}));
  auto s = h.stats->snapshot();
  EXPECT_EQ(s.inference_count, 8u);
}

TEST(Batcher, DefaultRowBuckets) {
  EXPECT_EQ(default_row_buckets(32, {}), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(default_row_buckets(12, {6, 12, 40}), (std::vector<int64_t>{1, 2, 4, 6, 8, 12}));
  EXPECT_EQ(default_row_buckets(1, {}), (std::vector<int64_t>{1}));
  EXPECT_TRUE(default_row_buckets(0, {}).empty());
}

// Two instances take two batches at the same time (both blocked inside run() at once), and the
// per-instance counters say which ran what.
TEST(Batcher, TwoInstancesRunAtTheSameTimeAndCountWhatTheyRan) {
  BatcherOptions o = dynamic(1, 0);
  o.instance_names = {"m_0_0", "m_0_1"};
  Harness h(o, 2);
  h.rec->gate_open = false;
  auto a = h.submit(1), b = h.submit(2);
  ASSERT_TRUE(h.rec->wait_running(2));  // both inside run(): concurrent
  EXPECT_EQ(h.batcher->max_concurrent(), 2);
  h.rec->open_gate();
  expect_add_sub(a.get(), 1);
  expect_add_sub(b.get(), 2);
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 20; ++i) f.push_back(h.submit(10 + i));
  for (int i = 0; i < 20; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), 10 + i);
  h.batcher->stop();  // the counters are final once every worker is done
  auto c = h.batcher->instance_counters();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "m_0_0");
  EXPECT_EQ(c[1].name, "m_0_1");
  EXPECT_GE(c[0].executions, 1u);
  EXPECT_GE(c[1].executions, 1u);
  EXPECT_EQ(c[0].executions + c[1].executions, h.stats->snapshot().execution_count);
  EXPECT_EQ(c[0].rows + c[1].rows, 22u);
  EXPECT_GT(c[0].busy_ns, 0u);
}

// While the only instance is busy, a full batch is formed and staged; the instance takes it the
// moment it is done, and the staged requests still count against the queue limit.
TEST(Batcher, AFullBatchIsStagedWhileTheInstanceIsBusy) {
  auto o = dynamic(4, 5000000);  // 5 s delay: only a full batch leaves early
  o.dynamic->default_queue_policy.max_queue_size = 5;
  Harness h(o);
  h.rec->gate_open = false;
  auto first = h.submit(99, 4);  // full: runs at once
  ASSERT_TRUE(h.rec->wait_running(1));
  // The first batch itself may have been staged: at start each instance runs its (here empty)
  // background step, busy meanwhile, and a request arriving then waits staged.
  const uint64_t staged0 = h.batcher->staged_batches();
  ASSERT_LE(staged0, 1u);
  std::vector<std::future<Answer>> f;
  for (int i = 0; i < 4; ++i) f.push_back(h.submit(i));  // 4 rows: full
  for (int i = 0; i < 500 && h.batcher->staged_batches() == staged0; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(h.batcher->staged_batches(), staged0 + 1);
  EXPECT_EQ(h.batcher->queued(), 4u);  // staged, not started
  Status s5, s6;
  auto r5 = h.submit(5, 1, {}, {}, 4, &s5);
  auto r6 = h.submit(6, 1, {}, {}, 4, &s6);
  EXPECT_TRUE(s5.ok());
  EXPECT_EQ(s6.code(), StatusCode::kUnavailable);  // 4 staged + 1 queued = the limit of 5
  h.rec->open_gate();
  expect_add_sub(first.get(), 99, 4);
  for (int i = 0; i < 4; ++i) expect_add_sub(f[static_cast<size_t>(i)].get(), i);
  h.batcher->stop();  // request 5 runs alone on the drain
  expect_add_sub(r5.get(), 5);
  EXPECT_EQ(h.rec->batch_rows, (std::vector<int64_t>{4, 4, 1}));
}

// A staged batch gives way to a request of higher priority that comes after it was staged.
TEST(Batcher, AStagedBatchGivesWayToHigherPriority) {
  auto o = dynamic(2, 5000000);
  o.dynamic->priority_levels = 2;
  o.dynamic->default_priority_level = 2;
  Harness h(o);
  h.rec->gate_open = false;
  auto r0 = h.submit(0, 2);  // full: runs at once
  ASSERT_TRUE(h.rec->wait_running(1));
  const uint64_t staged0 = h.batcher->staged_batches();  // 1 if r0 met the start's background step
  auto l1 = h.submit(1), l2 = h.submit(2);  // full at 2 rows: staged
  for (int i = 0; i < 500 && h.batcher->staged_batches() == staged0; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(h.batcher->staged_batches(), staged0 + 1);
  auto high = h.submit(3, 2, 1u);  // 2 rows at priority 1: full too
  h.rec->open_gate();
  for (auto* x : {&r0, &l1, &l2}) ASSERT_TRUE(x->get().status.ok());
  expect_add_sub(high.get(), 3, 2);
  ASSERT_EQ(h.rec->first_values.size(), 3u);
  EXPECT_EQ(h.rec->first_values[1], 300.f);  // the priority-1 request ran before the staged two
  EXPECT_EQ(h.rec->first_values[2], 100.f);
}

}  // namespace
}  // namespace gpuopt::server
