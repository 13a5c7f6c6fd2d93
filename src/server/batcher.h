// Dynamic batcher for one model version: a priority queue of requests, a scheduler thread that
// forms batches (max_batch_size, max_queue_delay, preferred sizes, per-request timeout, sequence
// padding buckets) and hands each to the least-loaded idle instance, one worker thread per
// instance. Results are split back per request (in arrival order when preserve_ordering).
//
// Keeping the instances fed: while every instance is busy, the scheduler forms the next full
// batch (max_batch_size rows, or no compatible request left to wait for) and stages it (concatenates
// its requests and pads it to its row bucket) ahead of time; the instance that is free first takes
// it as soon as it finishes, without a trip through the scheduler. An instance whose model
// overlaps batches (parameters gpuopt.pipeline on: ModelInstance::overlaps) begins that staged
// batch before it finishes the current one, so the next upload runs while this one computes and
// this one's download while the next computes. Per-instance counters and the
// most instances seen executing at once are kept for the metrics (instance_counters()).
//
//   Batcher b(options, std::move(instances), stats);
//   b.start();
//   BatchRequest r;  r.inputs = {...};  r.done = [](Result<std::vector<Tensor>> out, const Timing& t) { ... };
//   Status s = b.submit(std::move(r));   // Unavailable when the queue is full or stopping
//   ...
//   b.stop();   // finishes what is queued and in flight, then joins
#pragma once

#include "server/answer_pool.h"
#include "server/model_config.h"
#include "server/model_instance.h"
#include "server/stats.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuopt::server {

struct Timing {
  uint64_t queue_ns = 0, compute_input_ns = 0, compute_infer_ns = 0, compute_output_ns = 0;
  int64_t batch_rows = 0;  // rows of the batch this request ran in
};

struct BatchRequest {
  std::vector<Tensor> inputs;  // model input order; dim 0 = rows when the model batches
  std::optional<uint64_t> timeout_us;
  std::optional<uint32_t> priority;  // 1 = highest; unset = default level
  // Called exactly once from a batcher thread: outputs in model order with this request's rows.
  std::function<void(Result<std::vector<Tensor>>, const Timing&)> done;
};

struct BatcherOptions {
  std::string model_name;
  int64_t max_batch_size = 0;              // 0: no batch dim, each request runs alone
  std::optional<DynamicBatching> dynamic;  // unset: requests are not combined
  SequencePadding padding;
  std::vector<IoSpec> inputs;  // model order
  std::vector<IoSpec> outputs;
  // Batch sizes the engine runs best (ascending): a batch of n rows runs as the smallest bucket
  // >= n, zero rows appended and their outputs dropped. A GPU instance replays one captured CUDA
  // graph per batch size, so a few sizes stay captured instead of every size from 1 to
  // max_batch_size being captured (and evicted) in turn. Empty: batches run as formed.
  std::vector<int64_t> row_buckets;
  std::vector<std::string> instance_names;  // for the metrics; default "0", "1", ...
  // Where a batch of several requests (or one padded to its row bucket) is formed: GPU models
  // form it in pinned memory (request_body.h), which the CUDA executor copies to the device from
  // where it is. Empty: ordinary host memory. Never used for BYTES inputs.
  std::function<Tensor(DType, const Shape&)> batch_alloc;
  // Helpers that deliver a large batch's answers in parallel with its answer thread (chunks of at
  // least kAnswersPerChunk requests; serially when null or with preserve_ordering).
  std::shared_ptr<AnswerPool> answer_pool;
  // Fill batches under load (kMaxFillWaitNs, Batcher::form_batch): for instances whose batch of
  // one row costs a large share of a full one (GPU models: BERT-base fp16 0.49 ms at 1 row, 5.36 ms
  // at 128). Off for CPU instances, whose cost grows with the rows: there the wait idled
  // the instance (gRPC at c256 on the 2-core VM: 10-18% fewer answers in 3 of 3 pairs).
  bool fill_batches = false;
};

// What one instance has done since the batcher started.
struct InstanceCounters {
  std::string name;
  uint64_t executions = 0;
  uint64_t rows = 0;     // batch rows run (padding rows excluded)
  uint64_t busy_ns = 0;  // time in execution (staging, run, splitting)
};

// The buckets for a GPU model: powers of two up to max_batch_size, max_batch_size itself and the
// preferred batch sizes.
std::vector<int64_t> default_row_buckets(int64_t max_batch_size, const std::vector<int64_t>& preferred);

// Answers per helper when a batch's answers are delivered in parallel: each answer costs a few
// to tens of microseconds (encoding, the gRPC write), a hand-over to a helper about as much.
constexpr size_t kAnswersPerChunk = 8;
// A batch's answers are shared with the helpers when answering them alone would take this long
// (by the time an answer took lately), or when other batches' answers wait behind them.
constexpr uint64_t kSplitAnswersAboveNs = 1000000;
// Filling batches under load: a batch of fewer than 3/4 of the rows batches have lately had waits
// for more requests up to half a recent large batch's execution time, at most this long (see
// Batcher::form_batch).
constexpr uint64_t kMaxFillWaitNs = 10000000;

class Batcher {
 public:
  Batcher(BatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
          std::shared_ptr<ModelStats> stats);
  ~Batcher();
  void start();
  // Rejects (Unavailable) when the queue for the request's priority is full or the batcher is
  // stopping; InvalidArgument for a request that cannot be batched (rows over max_batch_size).
  Status submit(BatchRequest request);
  // Stops accepting, runs everything queued and in flight, joins the threads.
  void stop();
  size_t queued() const;
  int instance_count() const { return static_cast<int>(instances_.size()); }
  std::vector<InstanceCounters> instance_counters() const;
  int max_concurrent() const;      // most instances executing at the same time so far
  uint64_t staged_batches() const;  // batches formed and staged while every instance was busy
  uint64_t filled_batches() const;  // batches held back to fill with more requests (kMaxFillWaitNs)

 private:
  struct Item;
  struct Instance;
  using Batch = std::vector<std::unique_ptr<Item>>;
  // A batch's model inputs, staged (concatenated, padded) before an instance runs it.
  struct Prepared {
    std::vector<Tensor> inputs;
    int64_t total = 0;      // request rows
    int64_t run_rows = 0;   // rows run (total + bucket padding)
    int64_t length = -1;    // padded sequence length (padding axis)
    bool direct = false;    // one request, inputs used as they are
    uint64_t input_ns = 0;  // time staging took
  };
  Prepared prepare(Batch& batch) const;
  // The next full batch, formed and staged while every instance is busy (under mu_; staging
  // itself runs with mu_ released). False when there is none to stage.
  bool stage_ahead(std::unique_lock<std::mutex>& lk, uint64_t now);
  // Puts a staged batch's requests back in their queues (a request of higher priority came).
  void unstage_locked();

  void scheduler_loop();
  void worker_loop(Instance* inst);
  // A batch on an instance: begun (ModelInstance::begin), then finished (its outputs split and
  // answered). An instance that overlaps() begins the next staged batch before finishing this one.
  struct Running {
    Batch batch;
    Prepared prep;
    uint64_t t1 = 0;  // begun
    Status begun;
  };
  void begin_batch(Instance* inst, Running& r);
  // defer: the answers go out from the answer thread (answer_loop), not this instance's.
  void end_batch(Instance* inst, Running& r, bool defer = false);
  void finish(Item& item, Result<std::vector<Tensor>> out, const Timing& t);
  // A batch's answers: each request's outputs (or the batch's error) and timing.
  struct Answers {
    Batch batch;
    std::vector<std::vector<Tensor>> pieces;
    Status err;
    std::vector<Timing> timing;
  };
  // backlog: other batches' answers wait behind this one (on the answer thread).
  void deliver(Answers& a, bool backlog);
  // Each instance's answer thread: the answers of a batch of several requests go out from here
  // when the instance has another batch waiting (their callbacks encode and hand over each answer:
  // ~10 us a request, a third of a millisecond for 32, which the instance would otherwise spend
  // before its next batch).
  void answer_loop(Instance* inst);
  // Takes the next batch off the queue when one is ready; *wake_at = when to look again.
  // only_full: only a batch that waiting could not make larger (staging ahead).
  bool form_batch(uint64_t now, Batch* out, uint64_t* wake_at, bool only_full = false);
  // With mu_ held: forms the batch that is due now and hands it to the least-used idle
  // instance; false when none is idle or nothing is due (*wake_at = when to look again).
  bool dispatch_locked(uint64_t now, uint64_t* wake_at);
  std::string shape_key(const std::vector<Tensor>& inputs) const;
  int64_t bucket_length(int64_t len) const;
  int64_t bucket_rows(int64_t rows) const;  // the smallest row bucket >= rows (rows if none)

  BatcherOptions opt_;
  std::shared_ptr<ModelStats> stats_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<QueuePolicy> policies_;  // per level (index = level - 1)
  uint32_t default_level_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::unique_ptr<Item>>> queues_;  // per priority level
  size_t queued_ = 0;
  bool stopping_ = false;
  bool started_ = false;
  bool workers_exit_ = false;
  uint64_t next_seq_ = 0;
  std::thread scheduler_;
  // Staged ahead while every instance was busy; the first instance free takes it.
  bool has_staged_ = false;
  Batch staged_;
  Batch staging_;  // formed by stage_ahead, being staged with the lock released: still counted
  Prepared staged_prep_;
  uint64_t staged_count_ = 0;
  int running_ = 0, max_running_ = 0;  // instances executing now, and the most at once
  // Moving averages over executed batches (under mu_): rows per batch and execution time, for
  // the fill wait in form_batch.
  double recent_rows_ = 0, recent_exec_ns_ = 0;
  uint64_t last_free_ns_ = 0;  // when an instance last finished and found nothing staged
  uint64_t filled_count_ = 0;

  std::mutex answer_mu_;  // the instances' answer queues (Instance::answers)
  std::atomic<uint64_t> answer_ns_{0};  // time one answer took lately (a moving average)
  bool answers_exit_ = false;

  // preserve_ordering: completions wait here until every earlier request has been answered.
  std::mutex order_mu_;
  uint64_t next_deliver_ = 0;
  std::map<uint64_t, std::function<void()>> ready_;
};

}  // namespace gpuopt::server
