// HttpServer/HttpClient against a real server on 127.0.0.1 (ephemeral port).
#include "net/http.h"
#include "net/net_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace gpuopt::net {
namespace {

using namespace std::chrono_literals;

Router echo_router() {
  Router r;
  r.get("/ping", [](const HttpRequest&) { return HttpResponse::text(200, "pong"); });
  r.post("/echo", [](const HttpRequest& q) { return HttpResponse::text(200, q.body); });
  r.get("/v2/models/{model}/versions/{version}", [](const HttpRequest& q) {
    return HttpResponse::json(200, std::string(q.param("model")) + "@" + std::string(q.param("version")));
  });
  r.get("/v2/models/{model}",
        [](const HttpRequest& q) { return HttpResponse::json(200, std::string(q.param("model"))); });
  r.get("/throw", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
  r.get("/drop", [](const HttpRequest&) -> HttpResponse { return HttpResponse::error(418, "teapot"); });
  r.add_async("GET", "/forget", [](HttpRequest&&, Responder) {});  // drops the responder
  return r;
}

using test::raw_exchange;
using test::start_loopback;

TEST(Http, RoutesParamsAndErrors) {
  auto server = start_loopback(echo_router());
  HttpClient c("127.0.0.1", server->port());
  auto r = c.get("/ping");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "pong");
  EXPECT_EQ(r->header("server"), "gpuopt");
  EXPECT_EQ(c.get("/v2/models/resnet/versions/3")->body, "resnet@3");
  EXPECT_EQ(c.get("/v2/models/resnet")->body, "resnet");
  EXPECT_EQ(c.get("/v2/models/a%20b")->body, "a b");  // percent-decoded path
  EXPECT_EQ(c.get("/v2/models/resnet?x=1")->body, "resnet");
  auto nf = c.get("/nope");
  EXPECT_EQ(nf->status, 404);
  EXPECT_NE(nf->body.find("\"error\""), std::string::npos);
  EXPECT_EQ(c.post("/ping", "x")->status, 405);
  auto th = c.get("/throw");
  EXPECT_EQ(th->status, 500);
  EXPECT_NE(th->body.find("boom"), std::string::npos);
  EXPECT_EQ(c.get("/drop")->status, 418);
  EXPECT_EQ(c.get("/forget")->status, 500);  // responder dropped: 500, no hang
  auto head = c.request("HEAD", "/ping");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(head->header("content-length"), "4");
  EXPECT_EQ(c.get("/ping")->body, "pong");  // connection still in sync after HEAD
}

TEST(Http, KeepAliveReusesOneConnection) {
  auto server = start_loopback(echo_router());
  HttpClient c("127.0.0.1", server->port());
  for (int i = 0; i < 50; ++i) {
    std::string body = "payload-" + std::to_string(i);
    auto r = c.post("/echo", body);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->body, body);
  }
  EXPECT_EQ(c.connects(), 1);
  EXPECT_EQ(server->counters().connections_accepted, 1u);
  EXPECT_EQ(server->counters().requests, 50u);
}

TEST(Http, ConnectionCloseIsHonoured) {
  auto server = start_loopback(echo_router());
  HttpClient c("127.0.0.1", server->port());
  auto r = c.request("GET", "/ping", {}, {{"Connection", "close"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header("connection"), "close");
  ASSERT_TRUE(c.get("/ping").ok());
  EXPECT_EQ(c.connects(), 2);
}

TEST(Http, BodyLimitGives413AndOthersContinue) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  auto server = start_loopback(echo_router(), o);
  HttpClient c("127.0.0.1", server->port());
  auto ok = c.post("/echo", std::string(1000, 'a'));
  EXPECT_EQ(ok->status, 200);
  auto big = c.post("/echo", std::string(200000, 'a'));
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("limit of 1000 bytes"), std::string::npos);
  // Chunked bodies have no Content-Length: the limit trips while reading.
  std::string chunked =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "7d0\r\n" +
      std::string(2000, 'b') + "\r\n0\r\n\r\n";
  EXPECT_EQ(raw_exchange(server->port(), chunked).rfind("HTTP/1.1 413", 0), 0u);
  EXPECT_EQ(c.get("/ping")->status, 200);
}

TEST(Http, HeaderLimitGives431) {
  ServerOptions o;
  o.max_header_bytes = 2048;
  auto server = start_loopback(echo_router(), o);
  HttpClient c("127.0.0.1", server->port());
  auto r = c.request("GET", "/ping", {}, {{"X-Big", std::string(4096, 'h')}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(c.get("/ping")->status, 200);
}

TEST(Http, MalformedRequestsGet400) {
  auto server = start_loopback(echo_router());
  EXPECT_EQ(raw_exchange(server->port(), "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(raw_exchange(server->port(), "GET /ping HTTP/1.1\r\nContent-Length: x\r\n\r\n").rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(raw_exchange(server->port(), "GET /v2/%zz HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // Two requests pipelined on one connection are both answered, in order.
  std::string two = raw_exchange(server->port(),
                                 "GET /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/models/m HTTP/1.1\r\nHost: x\r\n"
                                 "Connection: close\r\n\r\n");
  size_t a = two.find("pong"), b = two.find("\r\n\r\nm");
  EXPECT_NE(a, std::string::npos);
  EXPECT_NE(b, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_GE(server->counters().bad_requests, 3u);
}

TEST(Http, ExpectContinue) {
  auto server = start_loopback(echo_router());
  std::string reply = raw_exchange(server->port(),
                                   "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
                                   "Connection: close\r\n\r\nhello");
  EXPECT_EQ(reply.rfind("HTTP/1.1 100 Continue", 0), 0u) << reply;
  EXPECT_NE(reply.find("HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_NE(reply.find("hello"), std::string::npos);
}

TEST(Http, ConcurrentClientsGetTheirOwnAnswers) {
  Router r = echo_router();
  // Async answers from a foreign thread, as the batcher does.
  r.add_async("POST", "/later", [](HttpRequest&& q, Responder done) {
    std::thread([body = std::move(q.body), done] { done(HttpResponse::text(200, "later:" + body)); }).detach();
  });
  auto server = start_loopback(std::move(r));
  constexpr int kThreads = 8, kRequests = 150;
  std::atomic<int> good{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      HttpClient c("127.0.0.1", server->port());
      for (int i = 0; i < kRequests; ++i) {
        std::string body = std::to_string(t) + "/" + std::to_string(i);
        auto e = c.post(i % 2 ? "/echo" : "/later", body);
        if (e.ok() && e->status == 200 && e->body == (i % 2 ? body : "later:" + body)) good++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(good.load(), kThreads * kRequests);
  EXPECT_EQ(server->counters().connections_accepted, static_cast<uint64_t>(kThreads));
}

TEST(Http, MaxConnectionsGives503) {
  ServerOptions o;
  o.max_connections = 2;
  auto server = start_loopback(echo_router(), o);
  HttpClient a("127.0.0.1", server->port()), b("127.0.0.1", server->port()), c("127.0.0.1", server->port());
  ASSERT_EQ(a.get("/ping")->status, 200);
  ASSERT_EQ(b.get("/ping")->status, 200);
  auto r = c.get("/ping");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(server->counters().connections_rejected, 1u);
  a.close();
  for (int i = 0; i < 50 && server->counters().connections_open > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(c.get("/ping")->status, 200);
}

TEST(Http, StopFinishesInFlightAndClosesIdle) {
  Router r = echo_router();
  std::atomic<bool> entered{false};
  r.add_async("GET", "/slow", [&](HttpRequest&&, Responder done) {
    entered = true;
    std::thread([done] {
      std::this_thread::sleep_for(300ms);
      done(HttpResponse::text(200, "slow-done"));
    }).detach();
  });
  auto server = start_loopback(std::move(r));
  uint16_t port = server->port();
  HttpClient idle("127.0.0.1", port);
  ASSERT_EQ(idle.get("/ping")->status, 200);  // an idle keep-alive connection stays open
  Result<HttpResponse> slow = Status::Internal("not run");
  std::thread t([&] {
    HttpClient c("127.0.0.1", port);
    slow = c.get("/slow");
  });
  while (!entered) std::this_thread::sleep_for(1ms);
  auto t0 = std::chrono::steady_clock::now();
  server->stop(5s);
  auto took = std::chrono::steady_clock::now() - t0;
  t.join();
  ASSERT_TRUE(slow.ok()) << slow.status().to_string();
  EXPECT_EQ(slow->status, 200);
  EXPECT_EQ(slow->body, "slow-done");
  EXPECT_EQ(slow->header("connection"), "close");
  EXPECT_LT(took, 3s);     // did not wait for the idle connection
  EXPECT_GE(took, 200ms);  // but did wait for the in-flight one
  HttpClient late("127.0.0.1", port, 2s);
  EXPECT_FALSE(late.get("/ping").ok());  // no longer accepting
  EXPECT_FALSE(server->running());
}

TEST(Http, StopGivesUpAfterGrace) {
  Router r;
  r.add_async("GET", "/never", [](HttpRequest&&, Responder done) {
    std::thread([done] {
      std::this_thread::sleep_for(3s);
      done(HttpResponse::text(200, "x"));
    }).detach();
  });
  auto server = start_loopback(std::move(r));
  std::thread t([port = server->port()] {
    HttpClient c("127.0.0.1", port, 10s);
    auto res = c.get("/never");
    EXPECT_FALSE(res.ok());  // connection was force-closed
  });
  std::this_thread::sleep_for(100ms);
  auto t0 = std::chrono::steady_clock::now();
  server->stop(200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  t.join();
}

TEST(Http, PortInUseIsAClearError) {
  auto a = start_loopback(echo_router());
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = a->port();
  auto b = HttpServer::start(o, echo_router());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cannot bind 127.0.0.1:" + std::to_string(a->port())), std::string::npos)
      << b.status().to_string();
  ServerOptions bad_host;
  bad_host.host = "not-an-ip";
  auto bad = HttpServer::start(bad_host, echo_router());
  EXPECT_FALSE(bad.ok());
}

TEST(Http, UrlDecode) {
  std::string s;
  EXPECT_TRUE(url_decode("/a%2Fb%41", &s));
  EXPECT_EQ(s, "/a/bA");
  EXPECT_FALSE(url_decode("/a%4", &s));
  EXPECT_FALSE(url_decode("%g1", &s));
}

}  // namespace
}  // namespace gpuopt::net
