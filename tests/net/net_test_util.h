// The net tests' helpers: an HttpServer on 127.0.0.1 with an ephemeral port, and raw TCP
// connections for what HttpClient will not send (malformed, pipelined, slow or silent requests).
#pragma once

#include "net/http.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>

#include <memory>
#include <string>

namespace gpuopt::net::test {

// `opts` on 127.0.0.1, port chosen by the kernel, 4 threads unless `opts` says.
inline std::unique_ptr<HttpServer> start_loopback(Router router, ServerOptions opts = {}) {
  opts.host = "127.0.0.1";
  opts.port = 0;
  if (opts.threads == 0) opts.threads = 4;
  auto r = HttpServer::start(opts, std::move(router));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

// A raw connection from `source` (any 127.x address is loopback on Linux) with a 5 s receive
// timeout, so a bug cannot hang the test.
struct RawConn {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s{ioc};
  explicit RawConn(uint16_t port, const char* source = "127.0.0.1") {
    namespace asio = boost::asio;
    s.open(asio::ip::tcp::v4());
    s.bind({asio::ip::make_address(source), 0});
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    timeval tv{5, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  // Sends `bytes` (if any) and reads until the server closes or 5 s pass; with
  // `stop_at_keep_alive`, also after a complete answer that keeps the connection open.
  std::string exchange(const std::string& bytes, bool stop_at_keep_alive = true) {
    namespace asio = boost::asio;
    boost::system::error_code ec;
    if (!bytes.empty()) asio::write(s, asio::buffer(bytes), ec);
    std::string out;
    char buf[4096];
    for (;;) {
      size_t n = s.read_some(asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
      if (stop_at_keep_alive && out.find("\r\n\r\n") != std::string::npos &&
          out.find("Connection: close") == std::string::npos && out.find("connection: close") == std::string::npos)
        break;  // a keep-alive answer: the server will not close
    }
    return out;
  }
};

// Sends raw bytes on a fresh connection and reads until the server closes it.
inline std::string raw_exchange(uint16_t port, const std::string& bytes) {
  return RawConn(port).exchange(bytes, /*stop_at_keep_alive=*/false);
}

}  // namespace gpuopt::net::test
