// Test backends for the batcher and server tests: Triton's add_sub (OUTPUT0 = a + b,
// OUTPUT1 = a - b) over f32 tensors of any shape, recording every batch it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "server/model_instance.h"

namespace gpuopt::server::testing {

struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> batch_rows;  // rows of each execution, in execution order
  std::vector<float> first_values;  // INPUT0[0] of each execution (identifies requests)
  std::vector<Shape> shapes;        // INPUT0 shape per execution
  int running = 0;
  bool gate_open = true;  // false: run() blocks until opened
  std::chrono::milliseconds delay{0};
  bool fail = false;

  void open_gate() {
    std::lock_guard<std::mutex> lk(mu);
    gate_open = true;
    cv.notify_all();
  }
  // Waits until `n` executions are blocked in run() (or have run).
  bool wait_running(int n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, timeout, [&] { return running >= n; });
  }
};

class AddSubInstance : public ModelInstance {
 public:
  explicit AddSubInstance(std::shared_ptr<Recorder> rec, int id = 0) : rec_(std::move(rec)), id_(id) {}
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    {
      std::unique_lock<std::mutex> lk(rec_->mu);
      rec_->running++;
      rec_->cv.notify_all();
      rec_->cv.wait(lk, [&] { return rec_->gate_open; });
      rec_->batch_rows.push_back(in[0].rank() ? in[0].dim(0) : 1);
      rec_->first_values.push_back(in[0].numel() ? in[0].data<float>()[0] : 0.f);
      rec_->shapes.push_back(in[0].shape());
    }
    if (rec_->delay.count()) std::this_thread::sleep_for(rec_->delay);
    if (rec_->fail) return Status::Internal("backend exploded");
    Tensor a = in[0], b = in[1];
    Tensor s = Tensor::empty(DType::F32, a.shape()), d = Tensor::empty(DType::F32, a.shape());
    for (int64_t i = 0; i < a.numel(); ++i) {
      s.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
      d.data<float>()[i] = a.data<float>()[i] - b.data<float>()[i];
    }
    return std::vector<Tensor>{s, d};
  }

 private:
  std::shared_ptr<Recorder> rec_;
  int id_;
};

inline ModelSource add_sub_source(std::shared_ptr<Recorder> rec, Shape dims = {-1, 16}) {
  ModelSource src;
  src.inputs = {{"INPUT0", DType::F32, dims, true}, {"INPUT1", DType::F32, dims, true}};
  src.outputs = {{"OUTPUT0", DType::F32, dims, true}, {"OUTPUT1", DType::F32, dims, true}};
  src.create = [rec](const InstanceSpec&) -> Result<std::unique_ptr<ModelInstance>> {
    return std::unique_ptr<ModelInstance>(std::make_unique<AddSubInstance>(rec));
  };
  return src;
}

}  // namespace gpuopt::server::testing
