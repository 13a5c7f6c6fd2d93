// Internal to the batcher (batcher.cpp: queueing and scheduling; batch_run.cpp: staging, running
// and splitting a batch): the queued request and the instance as both see them.
#pragma once

#include "server/batcher.h"

#include <limits>

namespace gpuopt::server {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

struct Batcher::Item {
  BatchRequest req;
  int64_t rows = 1;
  uint64_t enqueue_ns = 0;
  uint64_t deadline_ns = kNever;
  bool delay_on_timeout = false;
  bool delayed = false;  // timed out with timeout_action DELAY: runs after the others
  bool taken = false;
  bool fill_waited = false;  // its batch was held back to fill (Batcher::form_batch)
  uint64_t seq = 0;
  uint32_t level = 1;  // priority level (1 = highest)
  std::string key;
  int64_t seq_len = -1;  // padding axis length (max over padded inputs)
};

struct Batcher::Instance {
  std::unique_ptr<ModelInstance> backend;
  std::string name;
  std::thread thread;
  Batch batch;
  bool prepared = false;  // `prep` holds the batch's staged inputs (it was staged ahead)
  Prepared prep;
  bool busy = false;
  bool background = true;  // ModelInstance::background_step may have work left
  uint64_t executions = 0, rows = 0, busy_ns = 0;
  std::condition_variable cv;
  // Its answer thread (Batcher::answer_loop), under Batcher::answer_mu_.
  std::thread answerer;
  std::condition_variable answer_cv;
  std::deque<Answers> answers;
  bool answering = false;  // delivering a batch's answers
};

}  // namespace gpuopt::server
