// HttpServer's defences against one client taking everything (issue 17): per-client connection
// cap, the first-request timeout, the in-flight body budget, and no leak of the server at stop.
#include "net/http.h"
#include "net/net_test_util.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>

#include <chrono>
#include <thread>

namespace gpuopt::net {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

// The limits tests' servers run two threads.
std::unique_ptr<HttpServer> start(Router router, ServerOptions opts) {
  opts.threads = 2;
  return test::start_loopback(std::move(router), opts);
}

Router ping_router() {
  Router r;
  r.get("/ping", [](const HttpRequest&) { return HttpResponse::text(200, "pong"); });
  r.post("/echo", [](const HttpRequest& q) { return HttpResponse::text(200, q.body); });
  return r;
}

using test::RawConn;

TEST(HttpLimits, ServerIsFreedAfterStop) {
  // The router lives in the server; a handler's capture dies with it. The pending accept once
  // held the server (a cycle), so it never died and LeakSanitizer failed every process.
  auto sentinel = std::make_shared<int>(7);
  std::weak_ptr<int> watch = sentinel;
  {
    Router r = ping_router();
    r.get("/s", [sentinel](const HttpRequest&) { return HttpResponse::text(200, std::to_string(*sentinel)); });
    sentinel.reset();
    auto server = start(std::move(r), {});
    HttpClient c("127.0.0.1", server->port());
    ASSERT_EQ(c.get("/s")->body, "7");
    c.close();
    server->stop(1s);
  }
  for (int i = 0; i < 100 && !watch.expired(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(watch.expired()) << "the HTTP server outlived its owner";
}

TEST(HttpLimits, PerClientCapGives503AndOthersAreServed) {
  ServerOptions o;
  o.max_connections_per_client = 2;
  auto server = start(ping_router(), o);
  HttpClient a("127.0.0.1", server->port()), b("127.0.0.1", server->port()), c("127.0.0.1", server->port());
  ASSERT_EQ(a.get("/ping")->status, 200);
  ASSERT_EQ(b.get("/ping")->status, 200);
  auto r = c.get("/ping");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("too many connections from 127.0.0.1"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("--http-max-connections-per-client"), std::string::npos) << r->body;
  // Another address is not locked out by the first one's connections.
  RawConn other(server->port(), "127.0.0.2");
  std::string answer = other.exchange("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  // A slot freed is a slot for the same client again, once the server has seen the close (it
  // unregisters on its I/O thread: polled, as the connection count alone also moves with c's and
  // the other address's connections).
  a.close();
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    c.close();
    auto again = c.get("/ping");
    status = again.ok() ? again->status : 0;
    if (status != 200) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpLimits, SilentConnectionsAreClosedAfterTheFirstRequestTimeout) {
  ServerOptions o;
  o.first_request_timeout = 300ms;
  auto server = start(ping_router(), o);
  RawConn silent(server->port());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(silent.exchange(""), "");  // closed without a word
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
  // Headers trickling in past the timeout count as silence too.
  RawConn slow(server->port());
  boost::system::error_code ec;
  asio::write(slow.s, asio::buffer(std::string("GET /ping HTTP/1.1\r\n")), ec);
  EXPECT_EQ(slow.exchange(""), "");
  // A connection that completed a request keeps the long keep-alive timeout.
  HttpClient kept("127.0.0.1", server->port());
  ASSERT_EQ(kept.get("/ping")->status, 200);
  std::this_thread::sleep_for(600ms);
  ASSERT_EQ(kept.get("/ping")->status, 200);
  EXPECT_EQ(kept.connects(), 1);
}

TEST(HttpLimits, InflightBudgetRefusesBodiesWith503) {
  ServerOptions o;
  o.inflight = std::make_shared<ByteBudget>(1000);
  auto server = start(ping_router(), o);
  HttpClient c("127.0.0.1", server->port());
  auto big = c.post("/echo", std::string(2000, 'x'));
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(big->status, 503);
  EXPECT_NE(big->body.find("--max-inflight-bytes"), std::string::npos) << big->body;
  // Chunked bodies are counted chunk by chunk.
  RawConn chunked(server->port());
  std::string answer =
      chunked.exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" +
                       std::string(1000, 'y') + "\r\n3e8\r\n" + std::string(1000, 'y') + "\r\n0\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 503"), std::string::npos) << answer.substr(0, 200);
  // What fits passes, and every refused or finished body gave its bytes back.
  for (int i = 0; i < 3; ++i) {
    auto ok = c.post("/echo", std::string(900, 'z'));
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(ok->status, 200);
  }
  for (int i = 0; i < 100 && o.inflight->used() != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(o.inflight->used(), 0u);
}

}  // namespace
}  // namespace gpuopt::net
