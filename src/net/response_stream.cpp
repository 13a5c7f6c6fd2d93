// ResponseStream: the producer/connection hand-off of a streamed response body (http.h).
#include "net/http.h"

namespace gpuopt::net {

HttpResponse HttpResponse::streamed(int status, std::string content_type, std::shared_ptr<ResponseStream> s) {
  HttpResponse r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.stream = std::move(s);
  return r;
}

ResponseStream::Write ResponseStream::write(std::string data) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_ || finished_) return Write::kClosed;
    if (queued_.size() + data.size() > capacity_) return Write::kFull;
    queued_ += data;
    // One wake-up per batch of writes: the connection takes everything queued at once.
    if (notify_ && !notify_pending_) {
      notify_pending_ = true;
      notify = notify_;
    }
  }
  if (notify) notify();
  return Write::kOk;
}

void ResponseStream::finish() {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_ || closed_) return;
    finished_ = true;
    if (notify_ && !notify_pending_) {
      notify_pending_ = true;
      notify = notify_;
    }
  }
  if (notify) notify();
}

void ResponseStream::on_close(std::function<void()> f) {
  std::lock_guard<std::mutex> lk(mu_);
  on_close_ = std::move(f);
}

bool ResponseStream::closed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return closed_;
}

size_t ResponseStream::buffered() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queued_.size();
}

void ResponseStream::attach(std::function<void()> notify) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    notify_ = std::move(notify);
    wake = !queued_.empty() || finished_;  // written before the connection took the response
    notify_pending_ = wake;
    if (wake && notify_) notify = notify_;
  }
  if (wake && notify) notify();
}

bool ResponseStream::take(std::string* out, bool* finished) {
  std::lock_guard<std::mutex> lk(mu_);
  notify_pending_ = false;
  out->clear();
  out->swap(queued_);
  *finished = finished_;
  return !out->empty() || finished_;
}

void ResponseStream::client_gone() {
  std::function<void()> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return;
    closed_ = true;
    notify_ = nullptr;  // it holds the connection (weakly); nothing more to wake
    std::string().swap(queued_);
    if (!finished_) cb = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (cb) cb();
}

}  // namespace gpuopt::net
