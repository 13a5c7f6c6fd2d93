// Internal to the HTTP server: one connection (server.cpp: the request/response cycle;
// server_stream.cpp: streamed responses). A connection lives on one I/O thread and handles one
// request at a time, so it needs no strand.
#pragma once

#include "core/log.h"
#include "net/http.h"
#include "net/parts_body.h"
#include "net/server_impl.h"

#include <malloc.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace gpuopt::net {

inline uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

namespace detail {
struct ResponderState {
  std::shared_ptr<Connection> conn;
  std::function<void(HttpResponse)> callback;  // instead of conn (Responder::callback)
  std::atomic<bool> done{false};
  ~ResponderState();
};
}  // namespace detail

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, std::string client)
      : server_(std::move(server)), client_(std::move(client)), stream_(std::move(socket)) {
    // Beast reads at most the buffer's free capacity (never under 512 bytes) per call: a
    // default flat_buffer read a 4.8 MB body 512 bytes at a time, 9400 system calls and about
    // 20 ms; with 64 KiB free it takes 75.
    buffer_.reserve(64 * 1024);
  }
  ~Connection() {
    release_body_budget();
    server_->unregister(this, client_);
  }

  void start() { read_next(); }

  // Over max_connections (or the per-client cap): answer 503 and close.
  void reject(std::string_view why) {
    HttpResponse r = HttpResponse::error(503, why);
    keep_alive_ = false;
    // Closed right after the answer, without lingering: a flood of connections over the cap
    // must not hold descriptors for the linger time.
    write_response(std::move(r), /*error_close=*/false);
  }

  // From any thread: queue the answer onto this connection's strand.
  void post_response(HttpResponse r) {
    if (server_->joined.load()) {  // threads are gone; nobody would run the write
      if (r.on_written) r.on_written(0);
      if (r.stream) r.stream->client_gone();
      return;
    }
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), r = std::move(r)]() mutable { self->write_response(std::move(r), false); });
  }

  // Server stop: idle keep-alive connections close now; busy ones close after their answer.
  void on_server_stop() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kIdle) self->close();
    });
  }
  void force_close() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kClosed };

  void read_next() {
    if (server_->stopping.load()) return close();
    state_ = State::kIdle;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->opts.max_header_bytes));
    parser_->body_limit(server_->opts.max_body_bytes);
    if (server_->opts.inflight) parser_->on_chunk_header(on_chunk_);
    stream_.expires_after(served_ ? server_->opts.idle_timeout : server_->opts.first_request_timeout);
    if (buffer_.size() > 0) {  // the next request's first bytes came with the last one
      first_byte_ns_ = steady_ns();
      return read_header();
    }
    // The first bytes on their own, to know when the request began to arrive; the header read
    // parses them before reading more.
    stream_.async_read_some(buffer_.prepare(64 * 1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec || self->state_ == State::kClosed) return self->on_read_error(ec);
      self->first_byte_ns_ = steady_ns();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    // Closed meanwhile (server stop while the headers were read): the parser is gone.
    if (state_ == State::kClosed) return;
    if (ec) return on_read_error(ec);
    state_ = State::kReading;
    stream_.expires_after(server_->opts.idle_timeout);  // the body: a request is under way
    if (auto n = parser_->content_length(); n && server_->opts.inflight && !take_body_budget(*n))
      return on_read_error(http::error::body_limit);
    auto& req = parser_->get();
    if (auto n = parser_->content_length(); n && *n >= (64 << 10) && server_->opts.body_buffer) {
      HttpRequest head;
      if (fill_head(req, &head)) raw_ = server_->opts.body_buffer(head, *n);
      if (raw_.size != *n) raw_ = {};
    }
    auto expect = req[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      continue_.emplace(http::status::continue_, req.version());
      http::async_write(stream_, *continue_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return dispatch();
    if (raw_.data) {  // straight from the socket into the handler's memory (what Beast buffered first)
      const size_t have = std::min(buffer_.size(), raw_.size);
      asio::buffer_copy(asio::buffer(raw_.data, have), buffer_.data());
      buffer_.consume(have);
      // Each read asks for all that is missing (asio's own conditions ask for 64 KiB a time).
      auto all_missing = [](const beast::error_code& e, size_t) -> size_t { return e ? 0 : size_t{1} << 30; };
      asio::async_read(stream_, asio::buffer(raw_.data + have, raw_.size - have), all_missing,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->on_read_error(ec);
                         self->dispatch();
                       });
      return;
    }
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->dispatch();
    });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == beast::error::timeout || ec == asio::error::bad_descriptor ||
        state_ == State::kClosed)
      return close();
    server_->bad_requests++;
    keep_alive_ = false;
    if (budget_refused_)
      return write_response(
          HttpResponse::error(503, fmt::format("server busy: request bodies in flight would pass the limit of {} "
                                               "bytes (--max-inflight-bytes); retry later",
                                               server_->opts.inflight->capacity())),
          true);
    if (ec == http::error::body_limit) {
      // What a chunked body had grown to is freed with the parser; give it back to the system.
      parser_.reset();
      malloc_trim(0);
      return write_response(HttpResponse::error(413, fmt::format("request body larger than the limit of {} bytes",
                                                                 server_->opts.max_body_bytes)),
                            true);
    }
    if (ec == http::error::header_limit)
      return write_response(HttpResponse::error(431, fmt::format("request headers larger than the limit of {} bytes",
                                                                 server_->opts.max_header_bytes)),
                            true);
    write_response(HttpResponse::error(400, "malformed HTTP request: " + ec.message()), true);
  }

  void dispatch() {
    state_ = State::kHandling;
    served_ = true;
    stream_.expires_never();
    auto msg = parser_->release();
    parser_.reset();
    HttpRequest req;
    head_ = msg.method() == http::verb::head;
    keep_alive_ = msg.keep_alive();
    if (!fill_head(msg, &req)) {
      server_->bad_requests++;
      keep_alive_ = false;
      return write_response(HttpResponse::error(400, "malformed percent-escape in the URL path"), true);
    }
    req.body = std::move(msg.body());
    req.raw_body = std::exchange(raw_, {});
    req.keep_alive = keep_alive_;
    req.received_ns = first_byte_ns_;
    auto state = std::make_shared<detail::ResponderState>();
    state->conn = shared_from_this();
    server_->router.dispatch(std::move(req), Responder(std::move(state)));
    release_body_budget();  // the body is gone with `req`; handlers account for what they keep
  }

  // The request line and headers; false when the path has a malformed percent-escape.
  static bool fill_head(const http::request_header<>& msg, HttpRequest* req) {
    req->headers.reserve(8);
    for (const auto& f : msg) req->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    const auto method = msg.method_string();
    const auto target = msg.target();
    return fill_request_line({method.data(), method.size()}, {target.data(), target.size()}, req);
  }

  // The in-flight budget holds each body from its header to the end of its handler.
  bool take_body_budget(uint64_t n) {
    if (!server_->opts.inflight->try_take(n)) {
      budget_refused_ = true;
      return false;
    }
    body_held_ += n;
    return true;
  }
  void release_body_budget() {
    if (body_held_) server_->opts.inflight->give_back(body_held_);
    body_held_ = 0;
  }

 public:
  void write_response(HttpResponse r, bool error_close) {
    if (state_ == State::kClosed || state_ == State::kWriting) {
      if (r.on_written) r.on_written(0);
      if (r.stream) r.stream->client_gone();  // the client left before the answer: stop producing
      return;
    }
    if (r.stream) return write_stream_head(std::move(r));
    state_ = State::kWriting;
    gone_ = nullptr;  // answered: a client leaving now is an ordinary close
    on_written_ = std::move(r.on_written);
    server_->requests++;
    if (server_->stopping.load()) keep_alive_ = false;
    res_.emplace(static_cast<http::status>(r.status), 11);
    res_->set(http::field::server, server_->opts.server_name);
    res_->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_->set(k, v);
    res_->keep_alive(keep_alive_);
    size_t n = r.body.size();
    for (const auto& p : r.tail) n += p.size;
    if (!head_) res_->body() = {std::move(r.body), std::move(r.tail)};
    res_->prepare_payload();
    if (head_) res_->content_length(n);
    stream_.expires_after(server_->opts.idle_timeout);
    http::async_write(stream_, *res_, [self = shared_from_this(), error_close](beast::error_code ec, size_t) {
      if (auto written = std::exchange(self->on_written_, nullptr)) written(ec ? 0 : steady_ns());
      self->res_.reset();
      self->head_ = false;
      if (ec) return self->close();
      if (error_close) return self->linger_close();
      if (!self->keep_alive_) return self->graceful_close();
      // A disconnect watch (Responder::on_client_gone) still reads the socket: the next request's
      // read starts once it has ended.
      if (self->swatching_) return self->after_watch([self] { self->read_next(); });
      self->read_next();
    });
  }

  // Responder::on_client_gone: while the request is handled, a read on the socket notices the
  // client leaving (EOF or reset) and runs `f` once, then closes the connection.
  void watch_client(std::function<void()> f) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), f = std::move(f)]() mutable {
      if (self->state_ != State::kHandling || self->gone_) return;  // answered (or closed) already
      self->gone_ = std::move(f);
      if (!self->swatching_) self->watch_disconnect();
    });
  }

 private:
  // Streamed responses (server_stream.cpp): the head, then chunks as the producer queues them,
  // while a read on the socket notices the client leaving.
  void write_stream_head(HttpResponse r);
  void pump_stream();
  void watch_disconnect();
  void end_stream();
  void after_watch(std::function<void()> next);

  void graceful_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    close();
  }

  // After an error answer the client may still be sending the body; reading it to EOF for a
  // short while lets the client read our answer instead of a connection reset.
  void linger_close() {
    state_ = State::kClosed;
    parser_.reset();  // what was read of the body is dropped, and with it its budget
    raw_ = {};
    release_body_budget();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    drain_.resize(64 * 1024);
    drain_more(0);
  }
  void drain_more(size_t total) {
    stream_.async_read_some(asio::buffer(drain_), [self = shared_from_this(), total](beast::error_code ec, size_t n) {
      if (ec || total + n > (size_t{256} << 20)) {
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
        return;
      }
      self->drain_more(total + n);
    });
  }

  void close() {
    if (sbody_) std::exchange(sbody_, nullptr)->client_gone();  // streaming: the producer stops
    gone_ = nullptr;
    after_watch_ = nullptr;
    state_ = State::kClosed;
    parser_.reset();
    raw_ = {};
    release_body_budget();
    beast::error_code ec;
    stream_.socket().close(ec);
  }

 public:
  std::shared_ptr<HttpServer::Impl> server_;  // declared first: destroyed after the socket

 private:
  std::string client_;  // remote address
  uint64_t body_held_ = 0;
  bool budget_refused_ = false;
  bool served_ = false;  // a complete request arrived (then the idle timeout is the keep-alive one)
  // Chunked bodies take the in-flight budget chunk by chunk (the parser keeps a reference).
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_ =
      [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
        if (!take_body_budget(size)) ec = http::error::body_limit;  // on_read_error answers 503
      };
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  BodyBuffer raw_;  // the body's memory when ServerOptions::body_buffer gave it
  std::optional<http::response<PartsBody>> res_;
  std::optional<http::response<http::empty_body>> continue_;
  std::vector<char> drain_;
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  bool head_ = false;
  uint64_t first_byte_ns_ = 0;                        // the request being read began to arrive
  std::function<void(uint64_t)> on_written_;          // of the response being written
  // A streamed response in progress: its source, the chunk being written, whether the last
  // chunk went out and whether the disconnect watch's read is pending.
  std::shared_ptr<ResponseStream> sbody_;
  std::optional<http::response<http::empty_body>> shead_;
  std::optional<http::response_serializer<http::empty_body>> sser_;
  std::string schunk_;
  bool swriting_ = false, sdone_ = false, swatching_ = false;
  std::function<void()> gone_;        // Responder::on_client_gone's callback while handling
  std::function<void()> after_watch_; // what waits for the watch's read to end
};

}  // namespace gpuopt::net
