// Streamed responses (HttpResponse::stream): chunked transfer encoding, the bounded buffer a slow
// reader fills, and the callback when the client leaves mid-stream.
#include "net_test_util.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gpuopt::net {
namespace {

using namespace std::chrono_literals;

// A route whose handler hands out its stream to the test, which produces on its own thread.
struct StreamRoute {
  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<ResponseStream> stream;
  std::atomic<int> closed{0};
  size_t capacity = 1 << 20;

  Router router() {
    Router r;
    r.get("/plain", [](const HttpRequest&) { return HttpResponse::json(200, "{\"ok\":true}"); });
    r.add_async("GET", "/events", [this](HttpRequest&&, Responder done) {
      auto s = std::make_shared<ResponseStream>(capacity);
      s->on_close([this] { closed++; });
      done(HttpResponse::streamed(200, "text/event-stream", s));
      std::lock_guard<std::mutex> lk(mu);
      stream = s;
      cv.notify_all();
    });
    return r;
  }
  std::shared_ptr<ResponseStream> wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, 5s, [&] { return stream != nullptr; });
    return std::exchange(stream, nullptr);
  }
};

TEST(HttpStream, ChunkedEventsArriveInOrderAndTheConnectionIsReused) {
  StreamRoute route;
  auto server = test::start_loopback(route.router());
  std::thread producer([&] {
    auto s = route.wait();
    ASSERT_NE(s, nullptr);
    for (int i = 0; i < 200; ++i) {
      ASSERT_EQ(s->write(fmt::format("data: {}\n\n", i)), ResponseStream::Write::kOk);
      if (i % 50 == 0) std::this_thread::sleep_for(2ms);
    }
    s->finish();
    EXPECT_EQ(s->write("late"), ResponseStream::Write::kClosed);
  });
  HttpClient client("127.0.0.1", server->port());
  auto r = client.get("/events");
  producer.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->header("Transfer-Encoding"), "chunked");
  std::string want;
  for (int i = 0; i < 200; ++i) want += fmt::format("data: {}\n\n", i);
  EXPECT_EQ(r->body, want);
  auto again = client.get("/plain");  // the same connection serves the next request
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, "{\"ok\":true}");
  EXPECT_EQ(client.connects(), 1);
  EXPECT_EQ(route.closed.load(), 0);  // finished, not abandoned
}

TEST(HttpStream, WritesBeforeTheConnectionTookTheResponseAreSent) {
  Router r;
  r.add_async("GET", "/now", [](HttpRequest&&, Responder done) {
    auto s = std::make_shared<ResponseStream>();
    s->write("data: early\n\n");
    s->finish();
    done(HttpResponse::streamed(200, "text/event-stream", s));
  });
  auto server = test::start_loopback(std::move(r));
  HttpClient client("127.0.0.1", server->port());
  auto res = client.get("/now");
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->body, "data: early\n\n");
}

TEST(HttpStream, ASlowReaderFillsTheBoundedBufferAndTheProducerIsTold) {
  StreamRoute route;
  route.capacity = 64 << 10;
  auto server = test::start_loopback(route.router());
  test::RawConn conn(server->port());
  boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")));
  auto s = route.wait();
  ASSERT_NE(s, nullptr);
  // The client reads nothing: the socket's buffers fill, then the stream's own 64 KiB.
  const std::string piece(16 << 10, 'x');
  size_t written = 0;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  ResponseStream::Write w = ResponseStream::Write::kOk;
  while (std::chrono::steady_clock::now() < deadline) {
    w = s->write(piece);
    if (w != ResponseStream::Write::kOk) break;
    written += piece.size();
    if (s->buffered() > 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(w, ResponseStream::Write::kFull);
  EXPECT_LE(s->buffered(), size_t{64} << 10);
  EXPECT_LT(written, size_t{256} << 20);  // the kernel's buffers, not unbounded memory
  // The producer gives up; the client closes: the server notices and stays healthy.
  s->finish();
  conn.s.close();
  HttpClient client("127.0.0.1", server->port());
  auto r = client.get("/plain");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST(HttpStream, AClientThatLeavesMidStreamIsReported) {
  StreamRoute route;
  auto server = test::start_loopback(route.router());
  auto s = std::shared_ptr<ResponseStream>();
  {
    test::RawConn conn(server->port());
    boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")));
    s = route.wait();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->write("data: one\n\n"), ResponseStream::Write::kOk);
    char buf[512];
    boost::system::error_code ec;
    size_t n = conn.s.read_some(boost::asio::buffer(buf), ec);  // the head and the first chunk
    EXPECT_GT(n, 0u);
    EXPECT_NE(std::string(buf, n).find("Transfer-Encoding: chunked"), std::string::npos);
  }  // the client closes without waiting for the end
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (route.closed.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(route.closed.load(), 1);
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(s->write("data: two\n\n"), ResponseStream::Write::kClosed);
  s->finish();  // harmless after the close
  EXPECT_EQ(route.closed.load(), 1);
}

TEST(HttpStream, ServerStopEndsAnUnfinishedStream) {
  StreamRoute route;
  auto server = test::start_loopback(route.router());
  test::RawConn conn(server->port());
  boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")));
  auto s = route.wait();
  ASSERT_NE(s, nullptr);
  server->stop(100ms);  // the stream never finishes: closed after the grace period
  EXPECT_EQ(route.closed.load(), 1);
  EXPECT_EQ(s->write("x"), ResponseStream::Write::kClosed);
}

// Responder::on_client_gone: a handler that answers later learns when its client left.
struct LaterRoute {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Responder> pending;
  std::atomic<int> gone{0};
  Router router() {
    Router r;
    r.add_async("GET", "/later", [this](HttpRequest&&, Responder done) {
      done.on_client_gone([this] { gone++; });
      std::lock_guard<std::mutex> lk(mu);
      pending.push_back(done);
      cv.notify_all();
    });
    return r;
  }
  Responder wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, 5s, [&] { return !pending.empty(); });
    if (pending.empty()) return Responder();
    Responder r = pending.front();
    pending.erase(pending.begin());
    return r;
  }
};

TEST(HttpClientGone, ALeavingClientIsReportedBeforeTheAnswer) {
  LaterRoute route;
  auto server = test::start_loopback(route.router());
  Responder done;
  {
    test::RawConn conn(server->port());
    boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /later HTTP/1.1\r\nHost: x\r\n\r\n")));
    done = route.wait();
  }  // closed while the request is handled
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (route.gone.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(route.gone.load(), 1);
  done(HttpResponse::json(200, "{}"));  // too late: dropped, nothing breaks
  HttpClient client("127.0.0.1", server->port());
  std::thread answer([&] { route.wait()(HttpResponse::json(200, "{\"n\":1}")); });
  auto r = client.get("/later");
  answer.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "{\"n\":1}");
  EXPECT_EQ(route.gone.load(), 1);
}

TEST(HttpClientGone, AnsweredRequestsKeepTheConnectionAndPipelinedOnesAreServed) {
  LaterRoute route;
  auto server = test::start_loopback(route.router());
  test::RawConn conn(server->port());
  // Two requests at once: the second's bytes arrive while the first is watched.
  boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
                                                             "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::this_thread::sleep_for(20ms);
  route.wait()(HttpResponse::json(200, "{\"first\":1}"));
  route.wait()(HttpResponse::json(200, "{\"second\":2}"));
  std::string got;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got.find("second") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    boost::system::error_code ec;
    size_t n = conn.s.read_some(boost::asio::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  EXPECT_NE(got.find("{\"first\":1}"), std::string::npos) << got;
  EXPECT_NE(got.find("{\"second\":2}"), std::string::npos) << got;
  EXPECT_LT(got.find("first"), got.find("second"));
  EXPECT_EQ(route.gone.load(), 0);
  // And a third on the same connection.
  boost::asio::write(conn.s, boost::asio::buffer(std::string("GET /later HTTP/1.1\r\nHost: x\r\n\r\n")));
  route.wait()(HttpResponse::json(200, "{\"third\":3}"));
  got.clear();
  while (got.find("third") == std::string::npos) {
    boost::system::error_code ec;
    size_t n = conn.s.read_some(boost::asio::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  EXPECT_NE(got.find("{\"third\":3}"), std::string::npos) << got;
  EXPECT_EQ(route.gone.load(), 0);
}

}  // namespace
}  // namespace gpuopt::net
