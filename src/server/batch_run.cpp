// The batcher's execution half: a batch staged (requests concatenated, padded to the row bucket
// and the sequence bucket), run on an instance, and its outputs cut back per request.
#include <latch>

#include "core/log.h"
#include "server/batch_tensors.h"
#include "server/batcher.h"
#include "server/batcher_impl.h"

namespace gpuopt::server {

std::vector<int64_t> default_row_buckets(int64_t max_batch_size, const std::vector<int64_t>& preferred) {
  std::vector<int64_t> b;
  if (max_batch_size <= 0) return b;
  for (int64_t p = 1; p < max_batch_size; p *= 2) b.push_back(p);
  b.push_back(max_batch_size);
  for (int64_t p : preferred)
    if (p >= 1 && p <= max_batch_size) b.push_back(p);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

std::vector<InstanceCounters> Batcher::instance_counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<InstanceCounters> out;
  for (const auto& inst : instances_) out.push_back({inst->name, inst->executions, inst->rows, inst->busy_ns});
  return out;
}

int Batcher::max_concurrent() const {
  std::lock_guard<std::mutex> lk(mu_);
  return max_running_;
}

uint64_t Batcher::staged_batches() const {
  std::lock_guard<std::mutex> lk(mu_);
  return staged_count_;
}

uint64_t Batcher::filled_batches() const {
  std::lock_guard<std::mutex> lk(mu_);
  return filled_count_;
}

int64_t Batcher::bucket_rows(int64_t rows) const {
  for (int64_t b : opt_.row_buckets)
    if (b >= rows) return b;
  return rows;
}

Batcher::Prepared Batcher::prepare(Batch& batch) const {
  const uint64_t t0 = now_ns();
  Prepared p;
  int64_t total = 0;
  for (auto& it : batch) total += it->rows;
  const int axis = opt_.padding.axis;
  int64_t length = -1;
  if (axis > 0) length = bucket_length(batch[0]->seq_len);
  // Rows of zeros up to the batch size bucket (BatcherOptions::row_buckets); string inputs never.
  int64_t run_rows = opt_.max_batch_size > 0 ? bucket_rows(total) : total;
  for (const Tensor& t : batch[0]->req.inputs)
    if (t.dtype() == DType::String) run_rows = total;
  std::vector<Tensor> filler;  // one per input: run_rows - total rows of zeros
  if (run_rows > total)
    for (const Tensor& t : batch[0]->req.inputs) {
      Shape sh = t.shape();
      sh[0] = run_rows - total;
      filler.push_back(Tensor::zeros(t.dtype(), sh));
    }
  std::vector<Tensor>& inputs = p.inputs;
  p.direct = batch.size() == 1 && axis == 0 && filler.empty();
  if (p.direct) {
    inputs = batch[0]->req.inputs;
  } else {
    for (size_t i = 0; i < opt_.inputs.size(); ++i) {
      std::vector<const Tensor*> parts;
      for (auto& it : batch) parts.push_back(&it->req.inputs[i]);
      if (!filler.empty()) parts.push_back(&filler[i]);
      bool pad_this = axis > 0 && parts[0]->rank() > axis;
      inputs.push_back(
          concat_rows(parts, pad_this ? axis : 0, pad_this ? length : -1, opt_.padding.value, opt_.batch_alloc));
    }
  }
  p.total = total;
  p.run_rows = run_rows;
  p.length = length;
  p.input_ns = now_ns() - t0;
  return p;
}

void Batcher::begin_batch(Instance* inst, Running& r) {
  r.t1 = now_ns();
  r.begun = inst->backend->begin(r.prep.inputs);
  r.prep.inputs.clear();  // begin() has copied (or run) them: the batch's staged copy is not needed
}

void Batcher::end_batch(Instance* inst, Running& r, bool defer) {
  Batch& batch = r.batch;
  const Prepared& prep = r.prep;
  const uint64_t t1 = r.t1;
  const uint64_t t0 = t1 - prep.input_ns;  // staging, whenever it happened, counts as compute input
  const int64_t total = prep.total, run_rows = prep.run_rows, length = prep.length;
  const int axis = opt_.padding.axis;
  Result<std::vector<Tensor>> out = r.begun.ok() ? inst->backend->finish() : Result<std::vector<Tensor>>(r.begun);
  uint64_t t2 = now_ns();
  Status err;
  if (out.ok() && out->size() != opt_.outputs.size())
    err = Status::Internal("model '{}' returned {} outputs, expected {}", opt_.model_name, out->size(),
                           opt_.outputs.size());
  if (out.ok() && err.ok() && opt_.max_batch_size > 0)
    for (size_t o = 0; o < out->size(); ++o)
      if ((*out)[o].rank() == 0 || (*out)[o].dim(0) != run_rows)
        err = Status::Internal("model '{}' output '{}' has {} rows for a batch of {}", opt_.model_name,
                               opt_.outputs[o].name, (*out)[o].rank() ? (*out)[o].dim(0) : 0, run_rows);
  if (!out.ok()) err = out.status();
  std::vector<std::vector<Tensor>> pieces(batch.size());
  if (err.ok()) {
    if (prep.direct) {
      pieces[0] = std::move(out).value();
    } else {
      int64_t row = 0;
      for (size_t b = 0; b < batch.size(); ++b) {
        for (const Tensor& o : *out) {
          bool cut = axis > 0 && o.rank() > axis && o.dim(axis) == length;
          pieces[b].push_back(slice_rows(o, row, batch[b]->rows, cut ? axis : 0, cut ? batch[b]->seq_len : -1));
        }
        row += batch[b]->rows;
      }
    }
  }
  uint64_t t3 = now_ns();
  if (err.ok()) stats_->record_execution(total, t1 - t0, t2 - t1, t3 - t2);
  if (!err.ok()) GPUOPT_LOG(warn, "model '{}': batch of {} failed: {}", opt_.model_name, total, err.to_string());
  Answers a;
  for (size_t b = 0; b < batch.size(); ++b) a.timing.push_back(Timing{t0 - batch[b]->enqueue_ns, t1 - t0, t2 - t1, t3 - t2, total});
  a.batch = std::move(batch);
  a.pieces = std::move(pieces);
  a.err = err;
  {
    // Behind answers still on the answer thread, these go there too: batches are answered in
    // the order they ran.
    std::lock_guard<std::mutex> lk(answer_mu_);
    defer = defer || !inst->answers.empty() || inst->answering;
    if (defer) inst->answers.push_back(std::move(a));
  }
  if (!defer) return deliver(a, false);
  inst->answer_cv.notify_one();
}

void Batcher::deliver(Answers& a, bool backlog) {
  auto answer = [&a, this](size_t from, size_t to) {
    for (size_t b = from; b < to; ++b) {
      if (a.err.ok())
        finish(*a.batch[b], std::move(a.pieces[b]), a.timing[b]);
      else
        finish(*a.batch[b], a.err, a.timing[b]);
    }
  };
  const size_t n = a.batch.size();
  // Helpers only where one thread answering alone would be the limit: answers already waiting
  // behind this batch, or this batch's answers taking long (large outputs: the gRPC write of each
  // is tens of microseconds). A hand-over to a helper costs a wake-up, which on a busy host is
  // worth more than a batch of small answers.
  const uint64_t per_answer = answer_ns_.load(std::memory_order_relaxed);
  size_t chunks = 1;
  if (opt_.answer_pool && !(opt_.dynamic && opt_.dynamic->preserve_ordering) &&
      (backlog || per_answer * n >= kSplitAnswersAboveNs))
    chunks = std::min(static_cast<size_t>(opt_.answer_pool->threads()) + 1, n / kAnswersPerChunk);
  const size_t mine = chunks <= 1 ? n : n / chunks;
  const uint64_t t0 = now_ns();
  if (chunks <= 1) {
    answer(0, n);
  } else {
    // Fork-join: this thread answers the first chunk, the helpers the others; the batch is done
    // (and stop() may return) only once all are.
    std::latch left(static_cast<std::ptrdiff_t>(chunks - 1));
    for (size_t c = 1; c < chunks; ++c)
      opt_.answer_pool->post([&answer, &left, c, n, chunks] {
        answer(c * n / chunks, (c + 1) * n / chunks);
        left.count_down();
      });
    answer(0, mine);
    const uint64_t t1 = now_ns();
    left.wait();
    if (mine > 0) answer_ns_.store((per_answer * 3 + (t1 - t0) / mine) / 4, std::memory_order_relaxed);
    a.batch.clear();
    return;
  }
  if (mine > 0) answer_ns_.store((per_answer * 3 + (now_ns() - t0) / mine) / 4, std::memory_order_relaxed);
  a.batch.clear();  // the requests' inputs go with their answers
}

void Batcher::answer_loop(Instance* inst) {
  std::unique_lock<std::mutex> lk(answer_mu_);
  for (;;) {
    inst->answer_cv.wait(lk, [&] { return !inst->answers.empty() || answers_exit_; });
    if (inst->answers.empty()) return;  // stopping, and every answer is out
    Answers a = std::move(inst->answers.front());
    inst->answers.pop_front();
    const bool backlog = !inst->answers.empty();  // another batch's answers wait behind these
    inst->answering = true;
    lk.unlock();
    deliver(a, backlog);
    lk.lock();
    inst->answering = false;
  }
}

void Batcher::finish(Item& item, Result<std::vector<Tensor>> out, const Timing& t) {
  if (!opt_.dynamic || !opt_.dynamic->preserve_ordering) {
    item.req.done(std::move(out), t);
    return;
  }
  // Answers leave in arrival order: hold this one until every earlier request was answered.
  auto done = std::move(item.req.done);
  auto shared = std::make_shared<Result<std::vector<Tensor>>>(std::move(out));
  std::lock_guard<std::mutex> lk(order_mu_);
  ready_[item.seq] = [done = std::move(done), shared, t] { done(std::move(*shared), t); };
  while (!ready_.empty() && ready_.begin()->first == next_deliver_) {
    ready_.begin()->second();
    ready_.erase(ready_.begin());
    ++next_deliver_;
  }
}

}  // namespace gpuopt::server
