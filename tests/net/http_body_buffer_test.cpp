// ServerOptions::body_buffer: a large body is read straight from the socket into the memory the
// hook gives (HttpRequest::raw_body, `body` empty), byte for byte, over keep-alive and pipelined
// requests; a small body, or a request the hook declines, keeps the std::string body.
#include "net_test_util.h"

#include <atomic>
#include <vector>

namespace gpuopt::net {
namespace {

using test::RawConn;
using test::start_loopback;

// Answers "<raw|string> <size> <checksum>" for the body it got.
Router checksum_router() {
  Router r;
  r.post("/sum", [](const HttpRequest& q) {
    const bool raw = q.raw_body.data != nullptr;
    std::string_view b = raw ? std::string_view(q.raw_body.data, q.raw_body.size) : std::string_view(q.body);
    if (raw && !q.body.empty()) return HttpResponse::text(500, "both bodies set");
    uint64_t sum = 0;
    for (size_t i = 0; i < b.size(); ++i) sum = sum * 131 + static_cast<unsigned char>(b[i]);
    return HttpResponse::text(200, std::string(raw ? "raw " : "string ") + std::to_string(b.size()) + " " +
                                       std::to_string(sum));
  });
  return r;
}

std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + static_cast<size_t>(seed)) % 251);
  return s;
}

std::string expected(const std::string& b, bool raw) {
  uint64_t sum = 0;
  for (char c : b) sum = sum * 131 + static_cast<unsigned char>(c);
  return std::string(raw ? "raw " : "string ") + std::to_string(b.size()) + " " + std::to_string(sum);
}

struct Hook {
  std::atomic<int> calls{0};
  std::atomic<size_t> last_size{0};
  ServerOptions options() {
    ServerOptions o;
    o.body_buffer = [this](const HttpRequest& head, size_t size) -> BodyBuffer {
      calls++;
      last_size = size;
      if (head.header("X-Decline") == "1" || head.path != "/sum") return {};
      auto mem = std::make_shared<std::vector<char>>(size + 3);
      return BodyBuffer{mem->data() + 3, size, mem};  // deliberately not at the block's start
    };
    return o;
  }
};

TEST(HttpBodyBuffer, LargeBodiesAreReadIntoTheHooksMemory) {
  Hook hook;
  auto server = start_loopback(checksum_router(), hook.options());
  HttpClient c("127.0.0.1", server->port());
  for (int i = 0; i < 3; ++i) {  // one keep-alive connection
    const std::string body = pattern((size_t{1} << 20) + static_cast<size_t>(i) * 4099, i);
    auto r = c.post("/sum", body);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->body, expected(body, true));
  }
  EXPECT_EQ(c.connects(), 1u);
  EXPECT_EQ(hook.calls.load(), 3);
  // Under 64 KiB: the hook is not asked.
  const std::string small = pattern(1000, 5);
  EXPECT_EQ(c.post("/sum", small)->body, expected(small, false));
  EXPECT_EQ(hook.calls.load(), 3);
  // Declined: the usual string body.
  const std::string big = pattern(200000, 6);
  EXPECT_EQ(c.post("/sum", big, {{"X-Decline", "1"}})->body, expected(big, false));
  EXPECT_EQ(hook.last_size.load(), big.size());
}

TEST(HttpBodyBuffer, PipelinedAndContinuedRequestsKeepTheirBoundaries) {
  Hook hook;
  auto server = start_loopback(checksum_router(), hook.options());
  // Two large requests in one write: the first body's read must stop at its Content-Length and
  // leave the second request's bytes for the parser.
  const std::string a = pattern(100000, 1), b = pattern(150000, 2);
  auto req = [](const std::string& body, bool close) {
    return "POST /sum HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           (close ? "Connection: close\r\n" : "") + "\r\n" + body;
  };
  RawConn conn(server->port());
  const std::string both = conn.exchange(req(a, false) + req(b, true), /*stop_at_keep_alive=*/false);
  const size_t pa = both.find(expected(a, true)), pb = both.find(expected(b, true));
  EXPECT_NE(pa, std::string::npos) << both.substr(0, 300);
  EXPECT_NE(pb, std::string::npos) << both.substr(0, 300);
  EXPECT_LT(pa, pb);
  // Expect: 100-continue, then the body.
  RawConn c2(server->port());
  const std::string reply = c2.exchange("POST /sum HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                                            std::to_string(a.size()) + "\r\nConnection: close\r\n\r\n" + a,
                                        false);
  EXPECT_EQ(reply.rfind("HTTP/1.1 100 Continue", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find(expected(a, true)), std::string::npos);
}

TEST(HttpBodyBuffer, ABodyCutShortIsDroppedAndTheServerStaysUp) {
  Hook hook;
  auto server = start_loopback(checksum_router(), hook.options());
  {
    RawConn conn(server->port());
    boost::system::error_code ec;
    const std::string head = "POST /sum HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n";
    boost::asio::write(conn.s, boost::asio::buffer(head + pattern(70000, 3)), ec);
    conn.s.close();  // half a body, then gone
  }
  HttpClient c("127.0.0.1", server->port());
  const std::string body = pattern(300000, 4);
  auto r = c.post("/sum", body);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->body, expected(body, true));
}

}  // namespace
}  // namespace gpuopt::net
