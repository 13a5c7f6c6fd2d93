// A small, fast HTTP/1.1 server (Boost.Beast/Asio) and a blocking client.
//
// The server runs one io_context on N threads (default: one per core). Each connection reads one
// request at a time (keep-alive, no pipelining overlap), routes it by method + path pattern, and
// writes the answer the handler gives — synchronously, or later from any thread through a
// Responder (the inference server answers from its batcher threads).
//
//   gpuopt::net::Router router;
//   router.get("/v2/health/live", [](const net::HttpRequest&) { return net::HttpResponse::json(200, "{}"); });
//   router.post_async("/v2/models/{model}/infer", [](net::HttpRequest&& req, net::Responder done) {
//     std::string model(req.param("model"));
//     enqueue(model, std::move(req.body), [done](std::string out) { done(net::HttpResponse::json(200, out)); });
//   });
//   net::ServerOptions opts;
//   opts.host = "127.0.0.1";
//   opts.port = 0;                      // ephemeral; server->port() tells which
//   GPUOPT_ASSIGN_OR_RETURN(auto server, net::HttpServer::start(opts, std::move(router)));
//   ...
//   server->stop(std::chrono::seconds(30));   // stop accepting, finish in-flight, close idle
//
//   net::HttpClient client("127.0.0.1", server->port());
//   GPUOPT_ASSIGN_OR_RETURN(net::HttpResponse r, client.get("/v2/health/live"));   // r.status == 200
//
// Limits: a body over max_body_bytes gets 413, headers over max_header_bytes get 431, a request
// the parser rejects gets 400, a connection over max_connections (lowered to the server's share
// of the file descriptors, descriptor_share) or over max_connections_per_client from one
// address gets 503; out of descriptors, accept backs off (one log line a second); a body that
// would take the in-flight budget past its capacity gets 503; each closes the connection and
// never disturbs the others.
// A connection that has not completed a request within first_request_timeout is closed.
#pragma once

#include "core/status.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuopt::net {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive header lookup; "" when absent.
std::string_view find_header(const Headers& headers, std::string_view name);

// Memory a large body is read into straight from the socket (ServerOptions::body_buffer), instead
// of HttpRequest::body: `keep` owns `data`.
struct BodyBuffer {
  char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> keep;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v2/models/m/infer?x=1"
  std::string path;    // target without the query, percent-decoded
  std::string query;   // after '?', raw
  Headers headers;
  std::string body;
  BodyBuffer raw_body;  // server side: the body when ServerOptions::body_buffer gave memory (`body` is then empty)
  Headers params;  // captures of the route pattern: {"model", "m"}
  bool keep_alive = true;
  // Server side: when its first byte was read (steady clock, ns since its epoch), so a handler
  // can tell time on the wire from its own.
  uint64_t received_ns = 0;

  std::string_view header(std::string_view name) const { return find_header(headers, name); }
  std::string_view param(std::string_view name) const;
};

// Bytes a response sends after its `body` without copying them into it (a tensor's data, say);
// `keep` holds them alive until they are written.
struct BodyPart {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keep;
};

// A response body produced over time — server-sent events — sent with chunked transfer encoding
// as the producer writes it. Producer side: write() and finish() from any thread. At most
// `capacity` bytes wait unsent: past that write() answers kFull and queues nothing (a slow reader;
// the producer then cancels its work or finishes the stream). When the client disconnects (or a
// write fails, or the server closes the connection) before the stream finished, the on_close
// callback runs once, on the connection's thread, and later writes answer kClosed.
//
//   auto s = std::make_shared<net::ResponseStream>(size_t{1} << 20);
//   s->on_close([id] { engine->cancel(id); });
//   done(net::HttpResponse::stream(200, "text/event-stream", s));
//   s->write("data: {...}\n\n");               // from the engine's thread
//   s->finish();                                 // the last chunk; the connection may be reused
class ResponseStream {
 public:
  enum class Write { kOk, kFull, kClosed };
  explicit ResponseStream(size_t capacity = size_t{1} << 20) : capacity_(capacity) {}
  Write write(std::string data);
  void finish();
  void on_close(std::function<void()> f);  // set before the response is handed to the Responder
  bool closed() const;                     // the client went away (not set by finish())
  size_t buffered() const;                 // bytes queued, not yet handed to the socket

  // Connection side (server.cpp).
  void attach(std::function<void()> notify);  // called when data or the end is queued
  bool take(std::string* out, bool* finished);  // what is queued; false when nothing is
  void client_gone();

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::string queued_;
  bool finished_ = false, closed_ = false, notify_pending_ = false;
  std::function<void()> notify_, on_close_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<BodyPart> tail;  // server side: sent after `body`, in order (Content-Length counts them)
  Headers headers;  // extra headers (server side) or every header received (client side)
  // Server side, optional: called once on the connection's I/O thread when the last byte was
  // handed to the socket (steady clock ns), or with 0 when the answer was never written.
  std::function<void(uint64_t written_ns)> on_written;
  // Server side, optional: the body comes from this stream instead of `body` (chunked encoding).
  std::shared_ptr<ResponseStream> stream;

  std::string_view header(std::string_view name) const { return find_header(headers, name); }
  static HttpResponse json(int status, std::string body);
  static HttpResponse text(int status, std::string body, std::string content_type = "text/plain; charset=utf-8");
  // {"error": "<message>"} — the KServe/Triton error body (a message that is not valid UTF-8 is
  // escaped with printable(), never thrown on).
  static HttpResponse error(int status, std::string_view message);
  static HttpResponse streamed(int status, std::string content_type, std::shared_ptr<ResponseStream> s);
};

namespace detail {
struct ResponderState;
}

// Completes one request: call it once, from any thread. Copies share one state; the first call
// wins, later calls are ignored. If every copy is dropped without a call, the client gets a 500
// (a handler bug must not leave a connection hanging).
class Responder {
 public:
  Responder() = default;
  explicit Responder(std::shared_ptr<detail::ResponderState> state) : state_(std::move(state)) {}
  // A Responder that hands the answer to `f` instead of a connection (tests, fuzz targets).
  static Responder callback(std::function<void(HttpResponse)> f);
  void operator()(HttpResponse response) const;
  // Optional: `f` runs once, on the connection's thread, if the client disconnects before this
  // request is answered (its work can be cancelled); the connection is then closed. Costs a read
  // on the socket while the request is handled; requests that never call it do not pay it.
  void on_client_gone(std::function<void()> f) const;

 private:
  std::shared_ptr<detail::ResponderState> state_;
};

using Handler = std::function<HttpResponse(const HttpRequest&)>;
using AsyncHandler = std::function<void(HttpRequest&&, Responder)>;

// Routes by method and path pattern. Patterns are '/'-separated segments; "{name}" captures one
// segment. First match in insertion order wins; a path that matches with another method gets 405,
// no match 404. A method, path or query that is not valid UTF-8 gets 400 before any routing (the
// bytes escaped in the message), so handlers only ever see UTF-8.
class Router {
 public:
  void add(std::string method, std::string pattern, Handler handler);
  void add_async(std::string method, std::string pattern, AsyncHandler handler);
  void get(std::string pattern, Handler h) { add("GET", std::move(pattern), std::move(h)); }
  void post(std::string pattern, Handler h) { add("POST", std::move(pattern), std::move(h)); }
  void post_async(std::string pattern, AsyncHandler h) { add_async("POST", std::move(pattern), std::move(h)); }
  // Called instead of 404 when nothing matches (optional).
  void set_not_found(Handler handler) { not_found_ = std::move(handler); }

  // Fills req.params and calls the handler (exceptions become 500).
  void dispatch(HttpRequest&& req, Responder done) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{x}" = capture
    AsyncHandler handler;
  };
  std::vector<Route> routes_;
  Handler not_found_;
};

// Bytes that requests in flight may hold across a server: the HTTP layer takes each body's size
// while it is read and handled; handlers take what they add (decoded tensors) through the same
// object. Thread-safe; create it with make_shared (holds keep it alive).
//
//   auto budget = std::make_shared<ByteBudget>(size_t{4} << 30);
//   std::shared_ptr<void> hold = budget->take(n);   // nullptr: over capacity (answer 503)
//   ...                                             // bytes come back when the last copy drops
class ByteBudget : public std::enable_shared_from_this<ByteBudget> {
 public:
  explicit ByteBudget(size_t capacity) : capacity_(capacity) {}
  std::shared_ptr<void> take(size_t bytes);
  bool try_take(size_t bytes);                // the raw form of take(): pair with give_back or adopt
  std::shared_ptr<void> adopt(size_t bytes);  // a hold for bytes already taken with try_take
  void give_back(size_t bytes) { used_.fetch_sub(bytes); }
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_.load(); }

 private:
  size_t capacity_;
  std::atomic<size_t> used_{0};
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 0;  // 0 = ephemeral
  int threads = 0;    // 0 = one per core
  size_t max_body_bytes = size_t{64} << 20;
  size_t max_header_bytes = size_t{16} << 10;
  size_t max_connections = 4096;
  size_t max_connections_per_client = 0;                              // per remote address; 0 = no cap
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};  // keep-alive and slow reads
  // A connection that has sent no complete request yet: time to send its first headers.
  std::chrono::milliseconds first_request_timeout{std::chrono::seconds(120)};
  std::shared_ptr<ByteBudget> inflight;  // request bodies count against it; null = unbounded
  // Optional: memory for a body of `size` bytes (Content-Length, >= 64 KiB) of the request whose
  // headers were read (its params not yet set). The body is read into it straight from the socket,
  // without Beast's buffer in between, and reaches the handler as HttpRequest::raw_body. A
  // BodyBuffer without data keeps the default (HttpRequest::body).
  std::function<BodyBuffer(const HttpRequest& head, size_t size)> body_buffer;
  std::string server_name = "gpuopt";
  // Share of the process's file descriptors (RLIMIT_NOFILE, less kReservedDescriptors) this
  // server's connections may take: max_connections is lowered to it, so that a flood of
  // connections on one listener cannot leave the others (gRPC, metrics) or the model files
  // without descriptors.
  double descriptor_share = 0.4;
};
constexpr size_t kReservedDescriptors = 128;

struct ServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_rejected = 0;  // over max_connections or max_connections_per_client
  uint64_t connections_open = 0;
  uint64_t requests = 0;      // requests answered (all statuses)
  uint64_t bad_requests = 0;  // 400/413/431 from the transport layer
};

class HttpServer {
 public:
  // Binds host:port and starts the threads; fails with a clear message when the port is taken.
  static Result<std::unique_ptr<HttpServer>> start(ServerOptions options, Router router);
  ~HttpServer();  // stop(0 grace) if still running

  uint16_t port() const;            // the bound port (useful with port 0)
  const std::string& host() const;  // as bound
  // Stops accepting, closes idle keep-alive connections, lets requests in flight finish and
  // answer (with "Connection: close"), then closes what is left after `grace` and joins threads.
  // Idempotent; safe from any thread except the server's own.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(30));
  bool running() const;
  ServerCounters counters() const;

  struct Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// Blocking HTTP/1.1 client over one keep-alive connection (reconnects when the server closed it).
// Not thread-safe: one per thread.
class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpResponse> request(std::string_view method, std::string_view target, std::string_view body = {},
                               const Headers& headers = {}, std::string_view content_type = "application/json");
  Result<HttpResponse> get(std::string_view target) { return request("GET", target); }
  Result<HttpResponse> post(std::string_view target, std::string_view body, const Headers& headers = {},
                            std::string_view content_type = "application/json") {
    return request("POST", target, body, headers, content_type);
  }
  void close();
  // Connections opened so far (1 when every request reused the same keep-alive connection).
  int connects() const { return connects_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int connects_ = 0;
};

// Percent-decodes a URL path ("%2F" -> "/"); false on a malformed escape.
bool url_decode(std::string_view in, std::string* out);

// A request's method, target, query and percent-decoded path from its request line (what the
// server does with each request head); false when the path has a malformed percent-escape.
bool fill_request_line(std::string_view method, std::string_view target, HttpRequest* req);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);
// `s` made safe to echo in an error message or a log line: bytes that are not part of valid
// UTF-8, and control characters, become \xNN; input past `max_bytes` is cut, and the cut says
// how long it was ("...(1048576 bytes)"). Valid and short input comes back unchanged.
std::string printable(std::string_view s, size_t max_bytes = 256);

}  // namespace gpuopt::net
