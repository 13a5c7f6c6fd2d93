// ModelInstance::background_step (the plan cache's CUDA-graph shapes captured after `ready`): the
// batcher runs the steps on the instance's thread while it is idle, never beside one of its
// batches; a request that arrives meanwhile goes to an idle instance, or waits for the step.
#include <gtest/gtest.h>

#include <future>

#include "fake_instance.h"
#include "server/batcher.h"

namespace gpuopt::server {
namespace {

using namespace std::chrono_literals;
using testing::AddSubInstance;
using testing::Recorder;

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
  bool wait_waiting(int n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, 5s, [&] { return waiting >= n; });
  }
};

// add_sub with `steps` background steps, each held at `gate` until it opens.
class StepInstance : public AddSubInstance {
 public:
  StepInstance(std::shared_ptr<Recorder> rec, std::shared_ptr<Gate> gate, int steps)
      : AddSubInstance(std::move(rec)), gate_(std::move(gate)), left_(steps) {}
  bool background_step() override {
    if (left_ == 0) return false;
    in_step_ = true;
    if (in_run_) overlaps++;
    {
      std::unique_lock<std::mutex> lk(gate_->mu);
      gate_->waiting++;
      gate_->cv.notify_all();
      gate_->cv.wait(lk, [&] { return gate_->open; });
    }
    steps_done++;
    in_step_ = false;
    return --left_ > 0;
  }
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    in_run_ = true;
    if (in_step_) overlaps++;
    auto r = AddSubInstance::run(in);
    in_run_ = false;
    return r;
  }
  std::atomic<int> steps_done{0}, overlaps{0};

 private:
  std::shared_ptr<Gate> gate_;
  int left_;
  std::atomic<bool> in_step_{false}, in_run_{false};
};

BatcherOptions options() {
  BatcherOptions o;
  o.model_name = "m";
  o.max_batch_size = 8;
  o.dynamic = DynamicBatching{};
  o.inputs = {{"INPUT0", DType::F32, {-1, 4}, true}, {"INPUT1", DType::F32, {-1, 4}, true}};
  o.outputs = {{"OUTPUT0", DType::F32, {-1, 4}, true}, {"OUTPUT1", DType::F32, {-1, 4}, true}};
  return o;
}

std::future<Result<std::vector<Tensor>>> submit(Batcher& b, float a0) {
  auto p = std::make_shared<std::promise<Result<std::vector<Tensor>>>>();
  BatchRequest r;
  Tensor a = Tensor::empty(DType::F32, {1, 4}), c = Tensor::empty(DType::F32, {1, 4});
  for (int i = 0; i < 4; ++i) {
    a.data<float>()[i] = a0 + static_cast<float>(i);
    c.data<float>()[i] = 1.0f;
  }
  r.inputs = {a, c};
  r.done = [p](Result<std::vector<Tensor>> out, const Timing&) { p->set_value(std::move(out)); };
  EXPECT_TRUE(b.submit(std::move(r)).ok());
  return p->get_future();
}

void expect_sum(std::future<Result<std::vector<Tensor>>>& f, float a0) {
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*r)[0].data<float>()[i], a0 + static_cast<float>(i) + 1.0f);
}

TEST(BatcherBackground, StepsRunWhileIdleNeverBesideABatchAndRequestsWaitForTheStep) {
  auto rec = std::make_shared<Recorder>();
  auto gate = std::make_shared<Gate>();
  auto inst = std::make_unique<StepInstance>(rec, gate, 3);
  StepInstance* s = inst.get();
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::move(inst));
  Batcher b(options(), std::move(v), std::make_shared<ModelStats>());
  b.start();
  ASSERT_TRUE(gate->wait_waiting(1));  // the first step began as soon as the instance was idle
  std::vector<std::future<Result<std::vector<Tensor>>>> answers;
  for (int i = 0; i < 4; ++i) answers.push_back(submit(b, 10.0f * static_cast<float>(i)));
  EXPECT_EQ(answers[0].wait_for(50ms), std::future_status::timeout);  // the only instance is in its step
  gate->release();
  for (int i = 0; i < 4; ++i) expect_sum(answers[static_cast<size_t>(i)], 10.0f * static_cast<float>(i));
  for (int i = 0; i < 500 && s->steps_done < 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s->steps_done.load(), 3);  // every step ran, and no more were asked for
  EXPECT_EQ(s->overlaps.load(), 0);
  b.stop();
}

TEST(BatcherBackground, ARequestGoesToAnInstanceNotBusyWithItsStep) {
  auto rec = std::make_shared<Recorder>();
  auto gate = std::make_shared<Gate>();
  std::vector<std::unique_ptr<ModelInstance>> v;
  auto busy = std::make_unique<StepInstance>(rec, gate, 1);
  StepInstance* s = busy.get();
  v.push_back(std::move(busy));
  v.push_back(std::make_unique<AddSubInstance>(rec, 1));  // no background work
  Batcher b(options(), std::move(v), std::make_shared<ModelStats>());
  b.start();
  ASSERT_TRUE(gate->wait_waiting(1));
  auto f = submit(b, 5.0f);
  expect_sum(f, 5.0f);  // answered by the second instance while the first is still held in its step
  EXPECT_EQ(s->steps_done.load(), 0);
  gate->release();
  for (int i = 0; i < 500 && s->steps_done < 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s->steps_done.load(), 1);
  auto g = submit(b, 7.0f);
  expect_sum(g, 7.0f);
  EXPECT_EQ(s->overlaps.load(), 0);
  b.stop();
}

}  // namespace
}  // namespace gpuopt::server
