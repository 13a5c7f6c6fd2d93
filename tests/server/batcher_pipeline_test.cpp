// The batcher's overlapped batches (ModelInstance::overlaps, parameters gpuopt.pipeline on): an
// instance that overlaps begins the staged next batch before it finishes the current one (the
// order a GPU instance needs to upload batch N+1 while N computes), answers stay those of each
// request and leave in batch order; an instance that does not overlap finishes each batch first.
#include <gtest/gtest.h>

#include <deque>
#include <future>

#include "server/batcher.h"

namespace gpuopt::server {
namespace {

using namespace std::chrono_literals;

// add_sub whose work happens in finish() (as a GPU's would, after begin() queued it); begin()
// can be held at a gate (a slow upload) while the test stages the next batch.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;  // "begin 100", "finish 100": INPUT0[0] of the batch
  bool begin_gate_open = true;
  int in_begin = 0;
};

class OverlapAddSub : public ModelInstance {
 public:
  OverlapAddSub(std::shared_ptr<Log> log, bool overlaps) : log_(std::move(log)), overlaps_(overlaps) {}
  bool overlaps() const override { return overlaps_; }
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override { return add_sub(in); }
  Status begin(const std::vector<Tensor>& in) override {
    std::unique_lock<std::mutex> lk(log_->mu);
    ++log_->in_begin;
    log_->cv.notify_all();
    log_->cv.wait(lk, [&] { return log_->begin_gate_open; });
    log_->events.push_back("begin " + std::to_string(static_cast<int>(in[0].data<float>()[0])));
    // A copy of the inputs, as a GPU instance's begin() copies them to its pinned buffer.
    std::vector<Tensor> copy;
    for (const Tensor& t : in) copy.push_back(t.clone());
    queued_.push_back(std::move(copy));
    return Status::Ok();
  }
  Result<std::vector<Tensor>> finish() override {
    if (queued_.empty()) return Status::FailedPrecondition("nothing begun");
    std::vector<Tensor> in = std::move(queued_.front());
    queued_.pop_front();
    {
      std::lock_guard<std::mutex> lk(log_->mu);
      log_->events.push_back("finish " + std::to_string(static_cast<int>(in[0].data<float>()[0])));
    }
    return add_sub(in);
  }

 private:
  static Result<std::vector<Tensor>> add_sub(const std::vector<Tensor>& in) {
    Tensor s = Tensor::empty(DType::F32, in[0].shape()), d = Tensor::empty(DType::F32, in[0].shape());
    for (int64_t i = 0; i < in[0].numel(); ++i) {
      s.data<float>()[i] = in[0].data<float>()[i] + in[1].data<float>()[i];
      d.data<float>()[i] = in[0].data<float>()[i] - in[1].data<float>()[i];
    }
    return std::vector<Tensor>{s, d};
  }
  std::shared_ptr<Log> log_;
  bool overlaps_;
  std::deque<std::vector<Tensor>> queued_;
};

struct Answer {
  Status status;
  std::vector<Tensor> out;
};

struct Harness {
  std::shared_ptr<Log> log = std::make_shared<Log>();
  std::unique_ptr<Batcher> batcher;
  std::mutex mu;
  std::vector<int> answered;  // request ids in the order they were answered

  explicit Harness(bool overlaps) {
    BatcherOptions o;
    o.model_name = "m";
    o.max_batch_size = 4;
    o.dynamic.emplace();
    o.dynamic->max_queue_delay_us = 5000000;  // only full batches leave before stop()
    o.inputs = {{"INPUT0", DType::F32, {-1, 4}, true}, {"INPUT1", DType::F32, {-1, 4}, true}};
    o.outputs = {{"OUTPUT0", DType::F32, {-1, 4}, true}, {"OUTPUT1", DType::F32, {-1, 4}, true}};
    std::vector<std::unique_ptr<ModelInstance>> inst;
    inst.push_back(std::make_unique<OverlapAddSub>(log, overlaps));
    batcher = std::make_unique<Batcher>(std::move(o), std::move(inst), std::make_shared<ModelStats>());
    batcher->start();
  }
  // Request `id`: one row of 4 values id*100 + i (a) and 1 (b).
  std::future<Answer> submit(int id) {
    auto p = std::make_shared<std::promise<Answer>>();
    BatchRequest r;
    Tensor a = Tensor::empty(DType::F32, {1, 4}), b = Tensor::empty(DType::F32, {1, 4});
    for (int i = 0; i < 4; ++i) {
      a.data<float>()[i] = static_cast<float>(id * 100 + i);
      b.data<float>()[i] = 1.f;
    }
    r.inputs = {a, b};
    r.done = [this, p, id](Result<std::vector<Tensor>> out, const Timing&) {
      {
        std::lock_guard<std::mutex> lk(mu);
        answered.push_back(id);
      }
      Answer ans{out.status(), {}};
      if (out.ok()) ans.out = std::move(out).value();
      p->set_value(std::move(ans));
    };
    EXPECT_TRUE(batcher->submit(std::move(r)).ok());
    return p->get_future();
  }
  void close_begin() {
    std::lock_guard<std::mutex> lk(log->mu);
    log->begin_gate_open = false;
  }
  void open_begin() {
    std::lock_guard<std::mutex> lk(log->mu);
    log->begin_gate_open = true;
    log->cv.notify_all();
  }
  bool wait_in_begin(int n) {
    std::unique_lock<std::mutex> lk(log->mu);
    return log->cv.wait_for(lk, 5s, [&] { return log->in_begin >= n; });
  }
};

void expect_add_sub(Answer a, int id) {
  ASSERT_TRUE(a.status.ok()) << a.status.to_string();
  ASSERT_EQ(a.out.size(), 2u);
  ASSERT_EQ(a.out[0].shape(), (Shape{1, 4}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.out[0].data<float>()[i], static_cast<float>(id * 100 + i) + 1.f) << "request " << id;
    EXPECT_EQ(a.out[1].data<float>()[i], static_cast<float>(id * 100 + i) - 1.f) << "request " << id;
  }
}

// Batch A (requests 1-4) is held in begin() while batch B (5-8) is formed and staged; then A goes.
std::vector<std::future<Answer>> two_batches(Harness& h) {
  h.close_begin();
  std::vector<std::future<Answer>> f;
  for (int id = 1; id <= 4; ++id) f.push_back(h.submit(id));  // full: A begins at once
  EXPECT_TRUE(h.wait_in_begin(1));
  // A itself was staged if it was formed while the instance ran its first background step (the
  // worker's start): count B's staging from here.
  const uint64_t before = h.batcher->staged_batches();
  for (int id = 5; id <= 8; ++id) f.push_back(h.submit(id));  // full while the instance is busy: B is staged
  for (int i = 0; i < 2500 && h.batcher->staged_batches() == before; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(h.batcher->staged_batches(), before + 1);
  h.open_begin();
  return f;
}

TEST(BatcherPipeline, TheStagedBatchIsBegunBeforeTheCurrentOneFinishes) {
  Harness h(/*overlaps=*/true);
  auto f = two_batches(h);
  for (int id = 1; id <= 8; ++id) expect_add_sub(f[static_cast<size_t>(id - 1)].get(), id);
  h.batcher->stop();
  EXPECT_EQ(h.log->events, (std::vector<std::string>{"begin 100", "begin 500", "finish 100", "finish 500"}));
  EXPECT_EQ(h.answered, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));  // batch order kept
  auto c = h.batcher->instance_counters();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].executions, 2u);
  EXPECT_EQ(c[0].rows, 8u);
}

TEST(BatcherPipeline, AnInstanceThatDoesNotOverlapFinishesEachBatchFirst) {
  Harness h(/*overlaps=*/false);
  auto f = two_batches(h);
  for (int id = 1; id <= 8; ++id) expect_add_sub(f[static_cast<size_t>(id - 1)].get(), id);
  h.batcher->stop();
  EXPECT_EQ(h.log->events, (std::vector<std::string>{"begin 100", "finish 100", "begin 500", "finish 500"}));
  EXPECT_EQ(h.answered, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// Under a stream of full batches every one is answered with its own rows (the overlapped chain
// runs on, taking each staged batch as it comes).
TEST(BatcherPipeline, ManyBatchesKeepTheirAnswers) {
  Harness h(/*overlaps=*/true);
  std::vector<std::future<Answer>> f;
  for (int id = 1; id <= 64; ++id) f.push_back(h.submit(id));
  for (int id = 1; id <= 64; ++id) expect_add_sub(f[static_cast<size_t>(id - 1)].get(), id);
  h.batcher->stop();
  size_t begins = 0, finishes = 0;
  for (const auto& e : h.log->events) (e.rfind("begin", 0) == 0 ? begins : finishes)++;
  EXPECT_EQ(begins, 16u);
  EXPECT_EQ(finishes, 16u);
}

}  // namespace
}  // namespace gpuopt::server
