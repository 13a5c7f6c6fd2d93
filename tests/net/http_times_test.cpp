// The server's wire times against a real server on 127.0.0.1: HttpRequest::received_ns is when
// the request's first byte was read, HttpResponse::on_written when its last byte was written.
// The bounds come from the client's own clock around what it did (the steady clock is one per
// machine), never from how fast anything ran.
#include "net/http.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuopt::net {
namespace {

namespace asio = boost::asio;

uint64_t steady_now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

struct Seen {
  uint64_t received = 0, handled = 0;
  std::promise<uint64_t> written;
};

// /t answers with the body; each request's times go to `seen` in arrival order.
std::unique_ptr<HttpServer> timing_server(std::vector<std::shared_ptr<Seen>>* seen, std::mutex* mu) {
  Router r;
  r.add_async("POST", "/t", [seen, mu](HttpRequest&& q, Responder done) {
    auto s = std::make_shared<Seen>();
    s->received = q.received_ns;
    s->handled = steady_now_ns();
    {
      std::lock_guard<std::mutex> lock(*mu);
      seen->push_back(s);
    }
    HttpResponse resp = HttpResponse::text(200, q.body);
    resp.on_written = [s](uint64_t ns) { s->written.set_value(ns); };
    done(std::move(resp));
  });
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.threads = 2;
  auto server = HttpServer::start(o, std::move(r));
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return std::move(server).value();
}

// Reads from `s` until `text` has arrived `times` times (5 s receive timeout: a bug cannot hang).
std::string read_until(asio::ip::tcp::socket& s, const std::string& text, int times) {
  std::string out;
  char buf[4096];
  boost::system::error_code ec;
  auto count = [&] {
    int n = 0;
    for (size_t p = out.find(text); p != std::string::npos; p = out.find(text, p + 1)) ++n;
    return n;
  };
  while (count() < times) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  return out;
}

TEST(HttpTimes, FirstByteReadAndLastByteWritten) {
  std::vector<std::shared_ptr<Seen>> seen;
  std::mutex mu;
  auto server = timing_server(&seen, &mu);
  asio::io_context ioc;
  asio::ip::tcp::socket s(ioc);
  s.connect({asio::ip::make_address("127.0.0.1"), server->port()});
  timeval tv{5, 0};
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // The request in two parts, 50 ms apart: its first byte is read before the second part left.
  const uint64_t before_first = steady_now_ns();
  asio::write(s, asio::buffer(std::string("POST /t HTTP/1.1\r\nHost: x\r\nContent-Le")));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t before_rest = steady_now_ns();
  asio::write(s, asio::buffer(std::string("ngth: 5\r\n\r\nhello")));
  const std::string reply = read_until(s, "hello", 1);
  ASSERT_NE(reply.find("HTTP/1.1 200 OK"), std::string::npos) << reply;
  // A second request on the connection: the server reads it only after the first answer's write
  // completed, so its first byte comes after the first answer's written time.
  const uint64_t before_second = steady_now_ns();
  asio::write(s, asio::buffer(std::string("POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")));
  ASSERT_NE(read_until(s, "abc", 1).find("HTTP/1.1 200 OK"), std::string::npos);
  std::lock_guard<std::mutex> lock(mu);  // the handler's writes happen before (TSan sees the lock)
  ASSERT_EQ(seen.size(), 2u);
  const Seen& r = *seen[0];
  EXPECT_GE(r.received, before_first);
  EXPECT_LT(r.received, before_rest);  // read before the rest of the request was even sent
  EXPECT_GE(r.handled, before_rest);
  auto written = seen[0]->written.get_future();
  ASSERT_EQ(written.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const uint64_t w = written.get();
  EXPECT_GE(w, r.handled);
  EXPECT_LE(w, seen[1]->received);  // written before the next request on the connection was read
  EXPECT_GE(seen[1]->received, before_second);
}

TEST(HttpTimes, PipelinedRequestsEachHaveTheirOwn) {
  std::vector<std::shared_ptr<Seen>> seen;
  std::mutex mu;
  auto server = timing_server(&seen, &mu);
  asio::io_context ioc;
  asio::ip::tcp::socket s(ioc);
  s.connect({asio::ip::make_address("127.0.0.1"), server->port()});
  timeval tv{5, 0};
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string one = "POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  const uint64_t before = steady_now_ns();
  asio::write(s, asio::buffer(one + one));  // the second arrives with the first
  const std::string reply = read_until(s, "abc", 2);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u) << reply;
  EXPECT_GE(seen[0]->received, before);
  // The second's first byte was in hand when the first was answered: it counts from then.
  EXPECT_GE(seen[1]->received, seen[0]->handled);
  EXPECT_LE(seen[1]->received, seen[1]->handled);
  for (auto& x : seen) {
    auto f = x->written.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_GE(f.get(), x->handled);
  }
}

}  // namespace
}  // namespace gpuopt::net
