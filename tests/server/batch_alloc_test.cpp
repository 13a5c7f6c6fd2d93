// BatcherOptions::batch_alloc: a batch of several requests is formed in the memory it gives (GPU
// models: pinned blocks the CUDA executor copies from directly), a lone request still goes
// through as its own tensor, and the answers are the same.
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "fake_instance.h"
#include "server/batcher.h"
#include "server/request_body.h"

namespace gpuopt::server {
namespace {

using namespace std::chrono_literals;
using testing::AddSubInstance;
using testing::Recorder;

struct Seen {
  std::mutex mu;
  std::vector<const Storage*> storages;  // INPUT0's storage per execution
};

class StorageRecorder : public AddSubInstance {
 public:
  StorageRecorder(std::shared_ptr<Recorder> rec, std::shared_ptr<Seen> seen)
      : AddSubInstance(std::move(rec)), seen_(std::move(seen)) {}
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    {
      std::lock_guard<std::mutex> lk(seen_->mu);
      seen_->storages.push_back(in[0].storage().get());
    }
    return AddSubInstance::run(in);
  }

 private:
  std::shared_ptr<Seen> seen_;
};

std::future<Result<std::vector<Tensor>>> submit(Batcher& b, float a0, int64_t rows, Tensor* sent = nullptr) {
  auto p = std::make_shared<std::promise<Result<std::vector<Tensor>>>>();
  BatchRequest r;
  Tensor a = Tensor::empty(DType::F32, {rows, 4}), c = Tensor::empty(DType::F32, {rows, 4});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.data<float>()[i] = a0 + static_cast<float>(i);
    c.data<float>()[i] = 0.5f;
  }
  if (sent) *sent = a;
  r.inputs = {a, c};
  r.done = [p](Result<std::vector<Tensor>> out, const Timing&) { p->set_value(std::move(out)); };
  EXPECT_TRUE(b.submit(std::move(r)).ok());
  return p->get_future();
}

void expect_sum(std::future<Result<std::vector<Tensor>>>& f, float a0, int64_t rows) {
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].shape(), (Shape{rows, 4}));
  for (int64_t i = 0; i < rows * 4; ++i) EXPECT_EQ((*r)[0].data<float>()[i], a0 + static_cast<float>(i) + 0.5f);
}

TEST(BatchAlloc, BatchesAreFormedInTheGivenMemoryALoneRequestIsPassedThrough) {
  auto rec = std::make_shared<Recorder>();
  auto seen = std::make_shared<Seen>();
  std::set<const Storage*> given;
  std::mutex given_mu;
  BatcherOptions o;
  o.model_name = "m";
  o.max_batch_size = 8;
  o.dynamic = DynamicBatching{};
  o.inputs = {{"INPUT0", DType::F32, {-1, 4}, true}, {"INPUT1", DType::F32, {-1, 4}, true}};
  o.outputs = {{"OUTPUT0", DType::F32, {-1, 4}, true}, {"OUTPUT1", DType::F32, {-1, 4}, true}};
  o.batch_alloc = [&](DType dt, const Shape& shape) {
    Tensor t = Tensor::empty(dt, shape);
    std::lock_guard<std::mutex> lk(given_mu);
    given.insert(t.storage().get());
    return t;
  };
  std::vector<std::unique_ptr<ModelInstance>> v;
  v.push_back(std::make_unique<StorageRecorder>(rec, seen));
  Batcher b(std::move(o), std::move(v), std::make_shared<ModelStats>());
  rec->gate_open = false;
  b.start();
  Tensor lone;
  auto first = submit(b, 0.f, 2, &lone);  // alone: taken at once, held at the gate
  ASSERT_TRUE(rec->wait_running(1));
  auto second = submit(b, 100.f, 1), third = submit(b, 200.f, 3);  // queued: one batch of 4 rows
  for (int i = 0; i < 200 && b.queued() < 2; ++i) std::this_thread::sleep_for(5ms);
  rec->open_gate();
  expect_sum(first, 0.f, 2);
  expect_sum(second, 100.f, 1);
  expect_sum(third, 200.f, 3);
  b.stop();
  std::lock_guard<std::mutex> lk(seen->mu);
  ASSERT_EQ(seen->storages.size(), 2u);
  EXPECT_EQ(seen->storages[0], lone.storage().get());  // the lone request's own tensor
  EXPECT_EQ(given.count(seen->storages[1]), 1u);       // the batch of two: formed in batch_alloc's memory
}

TEST(BatchAlloc, PinnedBatchTensorsFallBackWhenThereIsNoPinnedMemory) {
  // Without CUDA (this build's CPU run, or a host without a device) no pinned block is to be had:
  // an undefined tensor tells the batcher to use ordinary memory.
  if (void* p = pinned_host_alloc(16)) {
    pinned_host_free(p);
    GTEST_SKIP() << "this host has pinned memory";
  }
  EXPECT_FALSE(pinned_batch_tensor(DType::F32, {4, 4}).defined());
}

}  // namespace
}  // namespace gpuopt::server
