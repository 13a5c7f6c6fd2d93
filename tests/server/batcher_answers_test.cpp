// The answers of a batch of several requests leave from the batcher's answer thread when the
// instance has another batch waiting, so slow answer callbacks (encoding, handing over) do not
// hold the instance; answers stay correct and in the order the batches ran, and stop() delivers
// every one of them. A batch of many requests whose answers take long is answered by the answer
// pool's helpers too, in parallel, each request once, before stop() returns.
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "fake_instance.h"
#include "server/batcher.h"

namespace gpuopt::server {
namespace {

using namespace std::chrono_literals;
using testing::AddSubInstance;
using testing::Recorder;

struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return open; });
  }
};

// Opens the latch when the test ends early (a failed assertion), before the batcher's stop()
// would wait for a callback held on it.
struct ReleaseAtEnd {
  Latch& l;
  ~ReleaseAtEnd() { l.release(); }
};

BatcherOptions options() {
  BatcherOptions o;
  o.model_name = "m";
  o.max_batch_size = 2;
  o.dynamic = DynamicBatching{};
  o.inputs = {{"INPUT0", DType::F32, {-1, 4}, true}, {"INPUT1", DType::F32, {-1, 4}, true}};
  o.outputs = {{"OUTPUT0", DType::F32, {-1, 4}, true}, {"OUTPUT1", DType::F32, {-1, 4}, true}};
  return o;
}

// Request `id` (one row: id*10 + i and 1); its callback waits for `hold` first when given.
std::future<float> submit(Batcher& b, int id, Latch* hold = nullptr) {
  auto p = std::make_shared<std::promise<float>>();
  BatchRequest r;
  Tensor a = Tensor::empty(DType::F32, {1, 4}), c = Tensor::empty(DType::F32, {1, 4});
  for (int i = 0; i < 4; ++i) {
    a.data<float>()[i] = static_cast<float>(id * 10 + i);
    c.data<float>()[i] = 1.f;
  }
  r.inputs = {a, c};
  r.done = [p, hold](Result<std::vector<Tensor>> out, const Timing&) {
    if (hold) hold->wait();
    p->set_value(out.ok() ? (*out)[0].data<float>()[3] : -1.f);  // a[3] + 1
  };
  EXPECT_TRUE(b.submit(std::move(r)).ok());
  return p->get_future();
}

TEST(BatcherAnswers, SlowAnswersOfABatchDoNotHoldTheInstanceWhenAnotherBatchWaits) {
  auto rec = std::make_shared<Recorder>();
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::make_unique<AddSubInstance>(rec));
  Latch hold;
  Batcher b(options(), std::move(v), std::make_shared<ModelStats>());
  ReleaseAtEnd release{hold};
  rec->gate_open = false;
  b.start();
  auto x = submit(b, 0);  // alone: taken at once, held at the gate
  ASSERT_TRUE(rec->wait_running(1));
  auto a1 = submit(b, 1, &hold), a2 = submit(b, 2, &hold);  // batch A: its answers wait for `hold`
  auto b1 = submit(b, 3), b2 = submit(b, 4);                // batch B waits behind it
  for (int i = 0; i < 200 && b.queued() < 4; ++i) std::this_thread::sleep_for(5ms);
  rec->open_gate();
  // B runs while A's answers are still held: they left the instance's thread. (B's answers
  // follow A's: batches are answered in the order they ran.)
  bool b_ran = false;
  for (int i = 0; i < 1000 && !b_ran; ++i) {
    {
      std::lock_guard<std::mutex> lk(rec->mu);
      b_ran = rec->batch_rows.size() == 3;
    }
    if (!b_ran) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(b_ran) << "batch B waited for batch A's answers";
  EXPECT_EQ(a1.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(b1.wait_for(50ms), std::future_status::timeout);  // behind A's
  hold.release();
  EXPECT_EQ(x.get(), 4.f);
  EXPECT_EQ(a1.get(), 14.f);
  EXPECT_EQ(a2.get(), 24.f);
  EXPECT_EQ(b1.get(), 34.f);
  EXPECT_EQ(b2.get(), 44.f);
  b.stop();
  std::lock_guard<std::mutex> lk(rec->mu);
  EXPECT_EQ(rec->batch_rows, (std::vector<int64_t>{1, 2, 2}));
}

TEST(BatcherAnswers, StopDeliversAnswersStillOnTheAnswerThread) {
  auto rec = std::make_shared<Recorder>();
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::make_unique<AddSubInstance>(rec));
  Latch hold;
  auto batcher = std::make_unique<Batcher>(options(), std::move(v), std::make_shared<ModelStats>());
  ReleaseAtEnd release{hold};
  rec->gate_open = false;
  batcher->start();
  auto x = submit(*batcher, 0);
  ASSERT_TRUE(rec->wait_running(1));
  std::vector<std::future<float>> f;
  for (int id = 1; id <= 6; ++id) f.push_back(submit(*batcher, id, id <= 2 ? &hold : nullptr));
  for (int i = 0; i < 200 && batcher->queued() < 6; ++i) std::this_thread::sleep_for(5ms);
  rec->open_gate();
  for (int i = 0; i < 1000; ++i) {  // every batch ran; answers from the first one on are held
    {
      std::lock_guard<std::mutex> lk(rec->mu);
      if (rec->batch_rows.size() == 4) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::thread stopper([&] { batcher->stop(); });  // waits for the held answers too
  std::this_thread::sleep_for(20ms);
  hold.release();
  stopper.join();
  for (int id = 1; id <= 6; ++id) {
    ASSERT_EQ(f[static_cast<size_t>(id - 1)].wait_for(0s), std::future_status::ready) << "request " << id;
    EXPECT_EQ(f[static_cast<size_t>(id - 1)].get(), static_cast<float>(id * 10 + 4));
  }
  EXPECT_EQ(x.get(), 4.f);
}

TEST(BatcherAnswers, ABatchOfManyIsAnsweredInParallelByTheHelpers) {
  auto rec = std::make_shared<Recorder>();
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::make_unique<AddSubInstance>(rec));
  BatcherOptions o = options();
  o.max_batch_size = 64;
  o.answer_pool = std::make_shared<AnswerPool>(3);
  auto batcher = std::make_unique<Batcher>(o, std::move(v), std::make_shared<ModelStats>());
  rec->gate_open = false;
  batcher->start();
  // Alone, held at the gate while the batch of 64 queues; its answer takes 4 ms, so that the
  // batcher expects the 64 answers to take long enough to share them (kSplitAnswersAboveNs).
  std::promise<float> px;
  auto x = px.get_future();
  {
    BatchRequest r;
    Tensor four = Tensor::empty(DType::F32, {1, 4});
    for (int i = 0; i < 4; ++i) four.data<float>()[i] = 4.f;
    r.inputs = {Tensor::zeros(DType::F32, {1, 4}), four};
    r.done = [&px](Result<std::vector<Tensor>> out, const Timing&) {
      std::this_thread::sleep_for(4ms);
      px.set_value(out.ok() ? (*out)[0].data<float>()[3] : -1.f);
    };
    ASSERT_TRUE(batcher->submit(std::move(r)).ok());
  }
  ASSERT_TRUE(rec->wait_running(1));
  // Each answer waits until four callbacks run at once (or 2 s): only parallel delivery meets it.
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, most = 0;
  std::set<std::thread::id> threads;
  std::vector<std::future<float>> f;
  for (int id = 1; id <= 64; ++id) {
    auto p = std::make_shared<std::promise<float>>();
    f.push_back(p->get_future());
    BatchRequest r;
    Tensor a = Tensor::empty(DType::F32, {1, 4}), c = Tensor::empty(DType::F32, {1, 4});
    for (int i = 0; i < 4; ++i) {
      a.data<float>()[i] = static_cast<float>(id * 10 + i);
      c.data<float>()[i] = 1.f;
    }
    r.inputs = {a, c};
    r.done = [&, p](Result<std::vector<Tensor>> out, const Timing&) {
      {
        std::unique_lock<std::mutex> lk(mu);
        threads.insert(std::this_thread::get_id());
        most = std::max(most, ++running);
        cv.notify_all();
        cv.wait_for(lk, 2s, [&] { return most >= 4; });
        --running;
      }
      p->set_value(out.ok() ? (*out)[0].data<float>()[3] : -1.f);
    };
    ASSERT_TRUE(batcher->submit(std::move(r)).ok());
  }
  for (int i = 0; i < 200 && batcher->queued() < 64; ++i) std::this_thread::sleep_for(5ms);
  rec->open_gate();
  EXPECT_EQ(x.get(), 4.f);
  batcher->stop();  // returns only once every chunk was answered
  for (int id = 1; id <= 64; ++id) {
    auto& r = f[static_cast<size_t>(id - 1)];
    ASSERT_EQ(r.wait_for(0s), std::future_status::ready) << "request " << id;
    EXPECT_EQ(r.get(), static_cast<float>(id * 10 + 4));
  }
  std::lock_guard<std::mutex> lk(rec->mu);
  EXPECT_EQ(rec->batch_rows, (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(most, 4);  // the answer thread and three helpers (chunks of kAnswersPerChunk or more)
  EXPECT_EQ(threads.size(), 4u);
}

TEST(BatcherAnswers, PreserveOrderingAnswersOneByOne) {
  auto rec = std::make_shared<Recorder>();
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::make_unique<AddSubInstance>(rec));
  BatcherOptions o = options();
  o.max_batch_size = 32;
  o.dynamic->preserve_ordering = true;
  o.answer_pool = std::make_shared<AnswerPool>(3);
  Batcher b(o, std::move(v), std::make_shared<ModelStats>());
  rec->gate_open = false;
  b.start();
  auto x = submit(b, 0);
  ASSERT_TRUE(rec->wait_running(1));
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::future<void>> f;
  for (int id = 1; id <= 32; ++id) {
    auto p = std::make_shared<std::promise<void>>();
    f.push_back(p->get_future());
    BatchRequest r;
    r.inputs = {Tensor::zeros(DType::F32, {1, 4}), Tensor::zeros(DType::F32, {1, 4})};
    r.done = [&, p, id](Result<std::vector<Tensor>>, const Timing&) {
      {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(id);
      }
      p->set_value();
    };
    ASSERT_TRUE(b.submit(std::move(r)).ok());
  }
  for (int i = 0; i < 200 && b.queued() < 32; ++i) std::this_thread::sleep_for(5ms);
  rec->open_gate();
  x.get();
  for (auto& r : f) r.get();
  b.stop();
  std::vector<int> want(32);
  for (int i = 0; i < 32; ++i) want[static_cast<size_t>(i)] = i + 1;
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace gpuopt::server
