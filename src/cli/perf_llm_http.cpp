// gpuopt perf (OpenAI mode): the streaming HTTP client and the SSE splitter (perf_llm_http.h).
// Each step is an async Beast operation run to completion on a private io_context, so the
// stream's timeout bounds every read.
#include "cli/perf_llm_http.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <limits>
#include <optional>

namespace gpuopt::cli::llmperf {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct StreamClient::Impl {
  std::string host;
  uint16_t port = 0;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void run() {
    ioc.restart();
    ioc.run();
  }
  void close() {
    if (!stream) return;
    beast::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.reset();
  }
  Status connect() {
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty())
      return Status::Unavailable("cannot resolve {}:{}: {}", host, port, ec ? ec.message() : "no address");
    stream.emplace(ioc);
    buffer.clear();
    stream->expires_after(timeout);
    stream->async_connect(*results.begin(), [&](beast::error_code e) { ec = e; });
    run();
    if (ec) {
      stream.reset();
      return Status::Unavailable("cannot connect to {}:{}: {}", host, port, ec.message());
    }
    beast::error_code ignored;
    stream->socket().set_option(tcp::no_delay(true), ignored);
    return Status::Ok();
  }
};

StreamClient::StreamClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
}

StreamClient::~StreamClient() = default;

Result<int> StreamClient::post(std::string_view target, std::string_view body,
                               const std::function<void(std::string_view)>& on_body) {
  http::request<http::string_body> req{http::verb::post, beast::string_view(target.data(), target.size()), 11};
  req.set(http::field::host, impl_->host);
  req.set(http::field::user_agent, "gpuopt-perf");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.keep_alive(true);
  req.body() = std::string(body);
  req.prepare_payload();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->stream.has_value();
    if (!reused) GPUOPT_RETURN_IF_ERROR(impl_->connect());
    beast::error_code ec;
    impl_->stream->expires_after(impl_->timeout);
    http::async_write(*impl_->stream, req, [&](beast::error_code e, size_t) { ec = e; });
    impl_->run();
    http::response_parser<http::buffer_body> parser;
    // Unbounded in effect (Boost 1.74 compares a Content-Length with an empty limit as "over").
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.header_limit(1 << 20);
    if (!ec) {
      impl_->stream->expires_after(impl_->timeout);
      http::async_read_header(*impl_->stream, impl_->buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      impl_->run();
    }
    if (ec) {
      impl_->close();
      // A kept-alive connection the server closed meanwhile: reconnect once and resend.
      const bool stale = ec == http::error::end_of_stream || ec == asio::error::eof ||
                         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
      if (reused && stale && attempt == 0) continue;
      if (ec == beast::error::timeout) return Status::DeadlineExceeded("POST {}: no answer within {} ms", target, impl_->timeout.count());
      return Status::Unavailable("POST {} to {}:{}: {}", target, impl_->host, impl_->port, ec.message());
    }
    const int status = static_cast<int>(parser.get().result_int());
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      impl_->stream->expires_after(impl_->timeout);
      // read_some: returns with what has arrived, so each event is seen when it comes.
      http::async_read_some(*impl_->stream, impl_->buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      impl_->run();
      if (ec == http::error::need_buffer) ec = {};
      const size_t got = sizeof chunk - parser.get().body().size;
      if (got) on_body(std::string_view(chunk, got));
      if (ec) {
        impl_->close();
        if (ec == beast::error::timeout)
          return Status::DeadlineExceeded("POST {}: the stream stalled for {} ms", target, impl_->timeout.count());
        return Status::Unavailable("POST {}: the stream broke off: {}", target, ec.message());
      }
    }
    if (!parser.keep_alive()) impl_->close();
    return status;
  }
  return Status::Unavailable("POST {}: connection lost", target);
}

namespace {
constexpr size_t kMaxLine = size_t{64} << 20;
}  // namespace

void SseParser::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data) {
  for (char c : bytes) {
    if (c != '\n') {
      // A line past the cap is cut (memory stays bounded; its JSON then fails to parse and the
      // request counts as failed).
      if (line_.size() < kMaxLine) line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // the blank line: the event is complete
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view v(line_);
      v.remove_prefix(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (has_data_) data_ += '\n';
      if (data_.size() < kMaxLine) data_ += v;
      has_data_ = true;
    }
    line_.clear();
  }
}

}  // namespace gpuopt::cli::llmperf
