// Dynamic batcher: queueing, batch formation, staging ahead and instance dispatch (running a batch
// and splitting its results: batch_run.cpp).
#include "server/batcher.h"
#include "server/batcher_impl.h"

#include <algorithm>
#include <limits>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "core/log.h"
#include "server/batch_tensors.h"

namespace gpuopt::server {

Batcher::Batcher(BatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                 std::shared_ptr<ModelStats> stats)
    : opt_(std::move(options)), stats_(std::move(stats)) {
  for (auto& b : instances) {
    auto inst = std::make_unique<Instance>();
    inst->backend = std::move(b);
    const size_t i = instances_.size();
    inst->name = i < opt_.instance_names.size() ? opt_.instance_names[i] : std::to_string(i);
    instances_.push_back(std::move(inst));
  }
  uint32_t levels = 1;
  QueuePolicy def;
  if (opt_.dynamic) {
    levels = std::max<uint32_t>(1, opt_.dynamic->priority_levels);
    def = opt_.dynamic->default_queue_policy;
    default_level_ = opt_.dynamic->priority_levels > 0 ? opt_.dynamic->default_priority_level : 1;
  }
  policies_.assign(levels, def);
  if (opt_.dynamic)
    for (auto& [level, p] : opt_.dynamic->priority_queue_policy)
      if (level >= 1 && level <= levels) policies_[level - 1] = p;
  queues_.resize(levels);
}

Batcher::~Batcher() {
  stop();
}

void Batcher::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) return;
  started_ = true;
  for (auto& inst : instances_) {
    inst->thread = std::thread([this, p = inst.get()] { worker_loop(p); });
    inst->answerer = std::thread([this, p = inst.get()] { answer_loop(p); });
  }
  scheduler_ = std::thread([this] { scheduler_loop(); });
}

size_t Batcher::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queued_ + staged_.size() + staging_.size();  // a staged batch has not started either
}

void Batcher::unstage_locked() {
  // Back into their queues in arrival order; the staged copy of their rows is dropped.
  for (auto& it : staged_) {
    auto& q = queues_[it->level - 1];
    it->taken = false;
    q.push_back(std::move(it));
    std::sort(q.begin(), q.end(), [](const auto& a, const auto& b) { return a->seq < b->seq; });
    ++queued_;
  }
  staged_.clear();
  staged_prep_ = Prepared();
  has_staged_ = false;
}

int64_t Batcher::bucket_length(int64_t len) const {
  for (int64_t b : opt_.padding.buckets)
    if (len <= b) return b;
  return len;  // longer than every bucket: batches only with equal lengths
}

std::string Batcher::shape_key(const std::vector<Tensor>& inputs) const {
  std::string key;
  for (const Tensor& t : inputs) {
    for (int64_t i = opt_.max_batch_size > 0 ? 1 : 0; i < t.rank(); ++i) {
      int64_t d = t.dim(i);
      if (opt_.padding.axis > 0 && i == opt_.padding.axis) d = -1;  // the padded axis joins by bucket below
      key += std::to_string(d);
      key.push_back(',');
    }
    key.push_back(';');
  }
  return key;
}

Status Batcher::submit(BatchRequest request) {
  if (request.inputs.size() != opt_.inputs.size())
    return Status::InvalidArgument("model '{}' takes {} inputs, got {}", opt_.model_name, opt_.inputs.size(),
                                   request.inputs.size());
  auto item = std::make_unique<Item>();
  if (opt_.max_batch_size > 0) {
    item->rows = -1;
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      const Tensor& t = request.inputs[i];
      if (t.rank() == 0)
        return Status::InvalidArgument("input '{}' needs a batch dim (model '{}' has max_batch_size {})",
                                       opt_.inputs[i].name, opt_.model_name, opt_.max_batch_size);
      if (item->rows >= 0 && t.dim(0) != item->rows)
        return Status::InvalidArgument("inputs disagree on the batch size: '{}' has {}, '{}' has {}",
                                       opt_.inputs[0].name, item->rows, opt_.inputs[i].name, t.dim(0));
      item->rows = t.dim(0);
    }
    if (item->rows < 1 || item->rows > opt_.max_batch_size)
      return Status::InvalidArgument("batch size {} is outside 1..{} (max_batch_size of model '{}')", item->rows,
                                     opt_.max_batch_size, opt_.model_name);
  }
  item->key = shape_key(request.inputs);
  if (opt_.padding.axis > 0) {
    for (const Tensor& t : request.inputs)
      if (t.rank() > opt_.padding.axis) item->seq_len = std::max(item->seq_len, t.dim(opt_.padding.axis));
    for (const Tensor& t : request.inputs)
      if (t.rank() > opt_.padding.axis && t.dim(opt_.padding.axis) != item->seq_len && opt_.inputs.size() > 1) {
        // Inputs padded together must agree on the length (tokens and their mask, say).
        return Status::InvalidArgument("inputs disagree on the length of the padded axis {}", opt_.padding.axis);
      }
    item->key += 'L';
    item->key += std::to_string(bucket_length(item->seq_len));
  }
  uint32_t level = request.priority.value_or(default_level_);
  if (level == 0) level = default_level_;
  if (level > queues_.size())
    return Status::InvalidArgument("priority {} is outside 1..{} for model '{}'", level, queues_.size(),
                                   opt_.model_name);
  const QueuePolicy& pol = policies_[level - 1];
  uint64_t timeout_us = pol.default_timeout_us;
  if (request.timeout_us && (pol.allow_timeout_override || !opt_.dynamic)) timeout_us = *request.timeout_us;
  item->enqueue_ns = now_ns();
  if (timeout_us > 0) item->deadline_ns = item->enqueue_ns + timeout_us * 1000;
  item->delay_on_timeout = pol.timeout_action == TimeoutAction::kDelay;
  item->req = std::move(request);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Status::Unavailable("model '{}' is shutting down", opt_.model_name);
    size_t waiting = queues_[level - 1].size();  // staged requests still count against the queue
    for (const auto& it : staged_) waiting += it->level == level;
    for (const auto& it : staging_) waiting += it->level == level;
    if (pol.max_queue_size > 0 && waiting >= pol.max_queue_size)
      return Status::Unavailable("exceeds maximum queue size ({}) of model '{}'", pol.max_queue_size, opt_.model_name);
    item->seq = next_seq_++;
    item->level = level;
    // A request of higher priority than a staged batch's must not wait behind it.
    bool outranks = has_staged_;
    for (const auto& it : staged_) outranks = outranks && level < it->level;
    if (outranks) unstage_locked();
    queues_[level - 1].push_back(std::move(item));
    ++queued_;
    // Fast path: a request that finds the queue empty and an instance idle is handed over from
    // this thread when its batch is due now, saving a wake-up of the scheduler thread (tens of
    // microseconds on a busy or virtualised host). With others queued, or a queue delay to wait
    // out, the scheduler decides as usual (it also answers expired requests first).
    uint64_t wake = kNever;
    if (started_ && queued_ == 1 && !has_staged_ && dispatch_locked(now_ns(), &wake)) return Status::Ok();
  }
  cv_.notify_one();
  return Status::Ok();
}

bool Batcher::dispatch_locked(uint64_t now, uint64_t* wake_at) {
  Instance* idle = nullptr;
  for (auto& inst : instances_)
    if (!inst->busy && (!idle || inst->executions < idle->executions)) idle = inst.get();
  if (!idle) return false;
  if (has_staged_) {  // staged while every instance was busy: it goes first
    idle->batch = std::move(staged_);
    staged_.clear();
    idle->prep = std::move(staged_prep_);
    idle->prepared = true;
    has_staged_ = false;
    idle->busy = true;
    idle->cv.notify_one();
    return true;
  }
  if (queued_ == 0) return false;
  Batch b;
  if (!form_batch(now, &b, wake_at)) return false;
  idle->batch = std::move(b);
  idle->busy = true;
  idle->cv.notify_one();
  return true;
}

bool Batcher::stage_ahead(std::unique_lock<std::mutex>& lk, uint64_t now) {
  if (has_staged_ || queued_ == 0) return false;
  for (const auto& inst : instances_)
    if (!inst->busy) return false;  // an idle instance takes batches as they are formed
  Batch b;
  uint64_t ignored = kNever;
  if (!form_batch(now, &b, &ignored, /*only_full=*/true)) return false;
  staging_ = std::move(b);  // submit() counts these against max_queue_size meanwhile
  lk.unlock();  // staging copies the requests' rows: the instances and submitters go on meanwhile
  Prepared p = prepare(staging_);
  lk.lock();
  staged_ = std::move(staging_);
  staging_.clear();
  staged_prep_ = std::move(p);
  has_staged_ = true;
  ++staged_count_;
  uint32_t best = std::numeric_limits<uint32_t>::max();
  for (const auto& it : staged_) best = std::min(best, it->level);
  for (uint32_t l = 1; l < best && l <= queues_.size(); ++l)
    if (!queues_[l - 1].empty()) {  // one of higher priority came while staging
      unstage_locked();
      break;
    }
  return true;
}

bool Batcher::form_batch(uint64_t now, Batch* out, uint64_t* wake_at, bool only_full) {
  // Visit order: priority levels high to low, undelayed before delayed, FIFO within.
  std::vector<Item*> order;
  order.reserve(queued_);
  for (int pass = 0; pass < 2; ++pass)
    for (auto& q : queues_)
      for (auto& it : q)
        if (it->delayed == (pass == 1)) order.push_back(it.get());
  if (order.empty()) return false;
  Item* first = order[0];
  std::vector<Item*> cand{first};
  int64_t sum = first->rows;
  bool combine = opt_.dynamic.has_value() && opt_.max_batch_size > 0;
  bool more_compatible = false;
  if (combine) {
    for (size_t i = 1; i < order.size(); ++i) {
      Item* it = order[i];
      if (it->key != first->key) continue;
      if (sum + it->rows > opt_.max_batch_size) {
        more_compatible = true;
        break;
      }
      cand.push_back(it);
      sum += it->rows;
    }
  }
  int64_t target = sum;
  if (combine) {
    const auto& d = *opt_.dynamic;
    uint64_t oldest = kNever;
    for (Item* c : cand) oldest = std::min(oldest, c->enqueue_ns);
    uint64_t due = oldest + d.max_queue_delay_us * 1000;
    // Under load from clients that send their next request when an answer comes back (a closed
    // loop: `perf`, or a pool of workers), the requests of a batch just answered come back one by
    // one; the idle instance would take the first alone, run a batch of one for the price of a
    // full one's overhead, and the rest would wait behind it (measured: 1,382 of 1,794 batches of
    // one row over gRPC at c256, mean 5.6 rows, max_batch_size 128, on the CPU host). So a batch of
    // fewer than three quarters of the rows batches have lately had waits for more, at most half
    // the execution time of a recent large batch (and kMaxFillWaitNs): a bounded delay, and none at
    // low load (the average follows the batches actually run). The wait counts from when an
    // instance last became free, not from the oldest request's arrival: a request that queued
    // behind a running batch has not waited for the others yet (one client answered alone kept a
    // batch of one alternating with one of 31 when the wait counted from its arrival). Three
    // quarters, not half: at half, two groups of clients in turn settled at 9 and 23 rows (under
    // TSan's slower answers); not the whole average: 127 and 128 rows in turn would wait each time.
    bool filling = false;
    if (opt_.fill_batches && static_cast<double>(sum) * 4 < recent_rows_ * 3 && !stopping_) {
      const uint64_t fill = std::min<uint64_t>(static_cast<uint64_t>(recent_exec_ns_ / 2), kMaxFillWaitNs);
      const uint64_t from = std::max(oldest, last_free_ns_);
      if (from + fill > due) {
        due = from + fill;
        filling = true;
      }
    }
    bool expired = now >= due || stopping_;
    bool full = sum >= opt_.max_batch_size || more_compatible;
    int64_t pref = 0;
    for (int64_t p : d.preferred_batch_size)
      if (p <= sum) pref = std::max(pref, p);
    if (full) {
      target = d.preferred_batch_size.empty() || pref == 0 || sum == opt_.max_batch_size ? sum : pref;
    } else if (only_full && !stopping_) {
      return false;  // staging ahead: waiting may still make it larger
    } else if (pref == sum) {
      target = sum;  // exactly a preferred size
    } else if (expired) {
      target = sum;
    } else {
      if (filling) first->fill_waited = true;
      *wake_at = std::min(*wake_at, due);
      return false;
    }
  }
  if (first->fill_waited) ++filled_count_;
  int64_t rows = 0;
  for (Item* c : cand) {
    if (rows + c->rows > target) break;
    c->taken = true;
    rows += c->rows;
  }
  for (auto& q : queues_) {
    for (auto& it : q)
      if (it->taken) out->push_back(std::move(it));
    q.erase(std::remove(q.begin(), q.end(), nullptr), q.end());
  }
  queued_ -= out->size();
  return true;
}

void Batcher::scheduler_loop() {
#ifdef __linux__
  // Linux lets a sleeping thread's timer fire up to 50 us late by default ("timer slack"), which
  // tripled a 50 us max_queue_delay; 1 us keeps the delay what the config says.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    uint64_t now = now_ns();
    uint64_t wake = kNever;
    // Timeouts: REJECT answers now; DELAY moves the request behind the others.
    std::vector<std::unique_ptr<Item>> expired;
    for (auto& q : queues_) {
      for (auto& it : q) {
        if (it->delayed || it->deadline_ns == kNever) continue;
        if (it->deadline_ns <= now) {
          if (it->delay_on_timeout)
            it->delayed = true;
          else
            expired.push_back(std::move(it));
        } else {
          wake = std::min(wake, it->deadline_ns);
        }
      }
      q.erase(std::remove(q.begin(), q.end(), nullptr), q.end());
    }
    queued_ -= expired.size();
    if (!expired.empty()) {
      lk.unlock();
      for (auto& it : expired) {
        Timing t;
        t.queue_ns = now - it->enqueue_ns;
        finish(*it,
               Status::Unavailable("request timeout expired after {} us in the queue of model '{}'", t.queue_ns / 1000,
                                   opt_.model_name),
               t);
      }
      lk.lock();
      continue;
    }
    if (stopping_ && queued_ == 0 && !has_staged_) break;
    if (dispatch_locked(now, &wake)) continue;
    if (stage_ahead(lk, now)) continue;
    if (wake == kNever) {
      cv_.wait(lk);
    } else {
      uint64_t n = now_ns();
      if (wake > n) cv_.wait_for(lk, std::chrono::nanoseconds(wake - n));
    }
  }
}

void Batcher::worker_loop(Instance* inst) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Idle: the instance's deferred start work (ModelInstance::background_step), one step at a
    // time on this thread, never beside one of its batches. Busy meanwhile, so a batch goes to
    // another instance or waits for this step (one shape's capture); with requests waiting, the
    // next step waits until they are taken.
    while (inst->background && !inst->busy && inst->batch.empty() && queued_ == 0 && !has_staged_ && !workers_exit_ &&
           !stopping_) {
      inst->busy = true;
      lk.unlock();
      const bool more = inst->backend->background_step();
      lk.lock();
      inst->background = more;
      inst->busy = false;
      cv_.notify_all();
    }
    auto ready = [&] { return !inst->batch.empty() || workers_exit_; };
    if (inst->background) {  // steps left: look again when the queue may have been taken by others
      if (!inst->cv.wait_for(lk, std::chrono::milliseconds(20), ready)) continue;
    } else {
      inst->cv.wait(lk, ready);
    }
    if (inst->batch.empty()) break;
    Batch b = std::move(inst->batch);
    inst->batch.clear();
    const bool prepared = inst->prepared;
    Prepared prep = std::move(inst->prep);
    inst->prepared = false;
    max_running_ = std::max(max_running_, ++running_);
    lk.unlock();
    const uint64_t t0 = now_ns();
    if (!prepared) prep = prepare(b);
    uint64_t rows = 0, executions = 0, staged_ns = prepared ? prep.input_ns : 0;
    Running cur;
    cur.batch = std::move(b);
    cur.prep = std::move(prep);
    b.clear();
    begin_batch(inst, cur);
    for (;;) {
      // Overlapped: the next staged batch is begun before this one is finished.
      Running next;
      bool have_next = false;
      if (inst->backend->overlaps()) {
        lk.lock();
        if (has_staged_) {
          next.batch = std::move(staged_);
          staged_.clear();
          next.prep = std::move(staged_prep_);
          has_staged_ = false;
          have_next = true;
          staged_ns += next.prep.input_ns;
          cv_.notify_all();  // the scheduler may stage the one after
        }
        lk.unlock();
        if (have_next) begin_batch(inst, next);
      }
      rows += static_cast<uint64_t>(cur.prep.total);
      ++executions;
      // Another batch waiting for this instance: the answers of several requests go out from its
      // answer thread meanwhile (an overlapped instance's next batch is already running).
      bool defer = false;
      if (!have_next && cur.batch.size() > 1) {
        lk.lock();
        defer = has_staged_ || queued_ > 0 || !staging_.empty();
        lk.unlock();
      }
      end_batch(inst, cur, defer);
      cur.batch.clear();  // the requests' inputs go before the next batch is taken
      if (!have_next) break;
      cur = std::move(next);
    }
    const uint64_t t1 = now_ns();
    lk.lock();
    --running_;
    inst->executions += executions;
    inst->rows += rows;
    inst->busy_ns += t1 - t0 + staged_ns;
    if (executions > 0) {  // the fill wait's averages (form_batch)
      const double r = static_cast<double>(rows) / static_cast<double>(executions);
      const double ns = static_cast<double>(t1 - t0 + staged_ns) / static_cast<double>(executions);
      // The wait's bound follows the batches as large as lately or larger: the small batches it
      // is there to prevent must not shrink it (their execution is short).
      if (recent_rows_ == 0 || r >= recent_rows_) recent_exec_ns_ = recent_exec_ns_ == 0 ? ns : (recent_exec_ns_ * 3 + ns) / 4;
      recent_rows_ = recent_rows_ == 0 ? r : (recent_rows_ * 3 + r) / 4;
    }
    if (has_staged_) {  // the next batch is staged: take it now, no trip through the scheduler
      inst->batch = std::move(staged_);
      staged_.clear();
      inst->prep = std::move(staged_prep_);
      inst->prepared = true;
      has_staged_ = false;
    } else {
      inst->busy = false;
      last_free_ns_ = t1;
    }
    cv_.notify_all();
  }
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!started_ || stopping_) {
      stopping_ = true;
      if (!started_) return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  {
    std::lock_guard<std::mutex> lk(mu_);
    workers_exit_ = true;
    for (auto& inst : instances_) inst->cv.notify_all();
  }
  for (auto& inst : instances_)
    if (inst->thread.joinable()) inst->thread.join();
  {
    std::lock_guard<std::mutex> lk(answer_mu_);
    answers_exit_ = true;  // the workers are gone: what is queued is all there will be
  }
  for (auto& inst : instances_) {
    inst->answer_cv.notify_all();
    if (inst->answerer.joinable()) inst->answerer.join();
  }
}

}  // namespace gpuopt::server
