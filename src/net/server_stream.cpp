// Streamed responses (HttpResponse::stream): chunked transfer encoding, written as the producer
// queues data; a pending read on the socket tells when the client leaves mid-stream.
#include "net/connection.h"

namespace gpuopt::net {

void Connection::write_stream_head(HttpResponse r) {
  state_ = State::kWriting;
  server_->requests++;
  if (server_->stopping.load()) keep_alive_ = false;
  if (r.on_written) r.on_written(steady_ns());  // a stream has no single "written" moment
  sbody_ = std::move(r.stream);
  sdone_ = false;
  gone_ = nullptr;
  shead_.emplace(static_cast<http::status>(r.status), 11);
  shead_->set(http::field::server, server_->opts.server_name);
  shead_->set(http::field::content_type, r.content_type);
  shead_->set(http::field::cache_control, "no-cache");
  for (auto& [k, v] : r.headers) shead_->set(k, v);
  shead_->keep_alive(keep_alive_);
  shead_->chunked(true);
  sser_.emplace(*shead_);
  stream_.expires_after(server_->opts.idle_timeout);
  http::async_write_header(stream_, *sser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec || self->state_ == State::kClosed) return self->close();
    std::weak_ptr<Connection> weak = self;
    auto notify = [weak] {
      if (auto c = weak.lock()) asio::post(c->stream_.get_executor(), [c] { c->pump_stream(); });
    };
    if (!self->swatching_) self->watch_disconnect();  // one may run since the request was handled
    self->sbody_->attach(notify);
  });
}

void Connection::watch_disconnect() {
  if (buffer_.size() >= (64 << 10)) return;  // a client pipelining that much is not leaving
  swatching_ = true;
  // On the socket itself, outside tcp_stream's timer: that one times the chunk writes.
  stream_.socket().async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->swatching_ = false;
    if (self->state_ == State::kClosed) return;
    if (!ec) self->buffer_.commit(n);  // the next request's first bytes: kept for read_next
    if (auto next = std::exchange(self->after_watch_, nullptr)) return next();  // the answer is out
    if (!ec) {
      const bool active = self->state_ == State::kHandling || (self->sbody_ && !self->sdone_);
      if (active) self->watch_disconnect();
      return;
    }
    if (ec == asio::error::operation_aborted) return;
    // EOF or reset: the client went away.
    if (auto f = std::exchange(self->gone_, nullptr)) f();
    self->close();
  });
}

void Connection::pump_stream() {
  if (state_ != State::kWriting || !sbody_ || swriting_ || sdone_) return;
  std::string data;
  bool finished = false;
  if (!sbody_->take(&data, &finished)) return;
  schunk_.clear();
  if (!data.empty() && !head_) {
    schunk_ = fmt::format("{:x}\r\n", data.size());
    schunk_ += data;
    schunk_ += "\r\n";
  }
  if (finished) schunk_ += "0\r\n\r\n";
  if (schunk_.empty()) return;
  swriting_ = true;
  stream_.expires_after(server_->opts.idle_timeout);  // a reader that stops reading is closed
  asio::async_write(stream_, asio::buffer(schunk_), [self = shared_from_this(), finished](beast::error_code ec, size_t) {
    self->swriting_ = false;
    if (ec || self->state_ == State::kClosed) return self->close();
    if (!finished) return self->pump_stream();
    self->sdone_ = true;
    self->sbody_ = nullptr;
    if (self->swatching_) return self->after_watch([self] { self->end_stream(); });
    self->end_stream();
  });
}

// Ends the disconnect watch's read (cancelled) and runs `next` from its callback: two reads on one
// socket must not overlap.
void Connection::after_watch(std::function<void()> next) {
  after_watch_ = std::move(next);
  beast::error_code ignored;
  stream_.socket().cancel(ignored);
}

// The last chunk is out and the watch read is over: the connection serves its next request.
void Connection::end_stream() {
  shead_.reset();
  sser_.reset();
  std::string().swap(schunk_);
  head_ = false;
  if (!keep_alive_) return graceful_close();
  read_next();
}

}  // namespace gpuopt::net
