// HttpClient: blocking calls over one keep-alive connection. Each step is an async Beast
// operation run to completion on a private io_context, so the tcp_stream timeout applies.
#include "net/http.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/span_body.hpp>

#include <optional>

namespace gpuopt::net {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
// Boost 1.74's Beast takes boost::string_view.
beast::string_view bsv(std::string_view s) {
  return {s.data(), s.size()};
}
}  // namespace

struct HttpClient::Impl {
  std::string host;
  uint16_t port;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  std::optional<tcp::endpoint> endpoint;

  // Free capacity is what Beast reads per call (512 bytes at least): 64 KiB keeps large
  // responses to few system calls.
  Impl() { buffer.reserve(64 * 1024); }

  // Runs the io_context until the pending operation completed (the stream timer bounds it).
  void run() {
    ioc.restart();
    ioc.run();
  }

  Status connect() {
    beast::error_code ec;
    if (!endpoint) {
      tcp::resolver resolver(ioc);
      auto results = resolver.resolve(host, std::to_string(port), ec);
      if (ec || results.empty())
        return Status::Unavailable("cannot resolve {}:{}: {}", host, port, ec ? ec.message() : "no address");
      endpoint = *results.begin();
    }
    stream.emplace(ioc);
    buffer.clear();
    stream->expires_after(timeout);
    stream->async_connect(*endpoint, [&](beast::error_code e) { ec = e; });
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

HttpClient::HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() = default;

void HttpClient::close() {
  if (impl_->stream) {
    beast::error_code ec;
    impl_->stream->socket().shutdown(tcp::socket::shutdown_both, ec);
    impl_->stream.reset();
  }
}

Result<HttpResponse> HttpClient::request(std::string_view method, std::string_view target, std::string_view body,
                                         const Headers& headers, std::string_view content_type) {
  http::verb verb = http::string_to_verb(bsv(method));
  // span_body: the body is sent from the caller's bytes, not copied (perf sends large tensors).
  http::request<http::span_body<const char>> req;
  if (verb == http::verb::unknown)
    req.method_string(bsv(method));
  else
    req.method(verb);
  req.target(bsv(target));
  req.version(11);
  req.set(http::field::host, impl_->host);
  req.set(http::field::user_agent, "gpuopt");
  if (!body.empty() || verb == http::verb::post) req.set(http::field::content_type, bsv(content_type));
  req.keep_alive(true);
  for (const auto& [k, v] : headers) req.set(k, v);  // may override Connection
  req.body() = beast::span<const char>(body.data(), body.size());
  req.prepare_payload();

  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = impl_->stream.has_value();
    if (!reused) {
      GPUOPT_RETURN_IF_ERROR(impl_->connect());
      ++connects_;
    }
    beast::error_code ec;
    impl_->stream->expires_after(impl_->timeout);
    http::async_write(*impl_->stream, req, [&](beast::error_code e, size_t) { ec = e; });
    impl_->run();
    http::response_parser<http::string_body> parser;
    parser.body_limit(size_t{4} << 30);
    parser.header_limit(1 << 20);
    if (verb == http::verb::head) parser.skip(true);  // a HEAD answer has Content-Length but no body
    if (!ec) {
      impl_->stream->expires_after(impl_->timeout);
      http::async_read(*impl_->stream, impl_->buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      impl_->run();
    }
    if (ec) {
      close();
      // A kept-alive connection the server closed meanwhile: reconnect once and resend.
      bool stale = ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
                   ec == asio::error::broken_pipe;
      if (reused && stale && attempt == 0) continue;
      if (ec == beast::error::timeout)
        return Status::DeadlineExceeded("{} {}: no answer within {} ms", method, target, impl_->timeout.count());
      return Status::Unavailable("{} {} to {}:{}: {}", method, target, impl_->host, impl_->port, ec.message());
    }
    auto msg = parser.release();
    HttpResponse r;
    r.status = static_cast<int>(msg.result_int());
    r.content_type = std::string(msg[http::field::content_type]);
    for (const auto& f : msg) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    r.body = std::move(msg.body());
    if (!msg.keep_alive()) close();
    return r;
  }
  return Status::Unavailable("{} {}: connection lost", method, target);
}

}  // namespace gpuopt::net
