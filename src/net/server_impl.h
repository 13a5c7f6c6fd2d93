// Internal to the HTTP server (server.cpp, server_accept.cpp): the server's state — I/O threads,
// the acceptor and its back-off, the open connections — shared by the connection code and the
// accept loop.
#pragma once

#include <utility>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/http.h"

namespace gpuopt::net {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
class Connection;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  ServerOptions opts;
  Router router;
  struct IoThread {
    asio::io_context ioc{1};  // concurrency hint: run by one thread
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::thread thread;
  };
  std::vector<std::unique_ptr<IoThread>> io;
  size_t next_io = 0;  // used by the acceptor's thread only
  std::optional<tcp::acceptor> acceptor;
  std::string host;
  uint16_t port = 0;

  std::atomic<bool> stopping{false};
  std::atomic<bool> joined{false};
  std::mutex stop_mu;  // serialises stop()

  std::mutex mu;  // guards conns and per_client
  std::condition_variable cv;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;
  std::unordered_map<std::string, size_t> per_client;  // open connections by remote address

  std::atomic<uint64_t> accepted{0}, rejected{0}, requests{0}, bad_requests{0};

  // Out of descriptors: accept fails at once and again (EMFILE); the acceptor backs off instead of
  // spinning, logs once a second, and sheds the connection at the head of the queue with the
  // spare descriptor held for that purpose.
  std::optional<asio::steady_timer> backoff;
  int spare_fd = -1;
  uint64_t accept_failures = 0;                  // since the last log line
  std::chrono::steady_clock::time_point last_accept_log{};

  Impl(ServerOptions o, Router r) : opts(std::move(o)), router(std::move(r)) {
    int n = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
    for (int i = 0; i < std::max(n, 1); ++i) io.push_back(std::make_unique<IoThread>());
    acceptor.emplace(io[0]->ioc);
    backoff.emplace(io[0]->ioc);
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    opts.max_connections = std::min(opts.max_connections, descriptor_cap(opts));
  }
  ~Impl() {
    if (spare_fd >= 0) ::close(spare_fd);
  }
  // Connections this server may hold: its share of the descriptors the process may open (less a
  // reserve for model files, logs and the other listeners), so that it cannot starve them.
  static size_t descriptor_cap(const ServerOptions& o);
  void on_accept_error(const beast::error_code& ec);
  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  void unregister(Connection* c, const std::string& client) {
    std::lock_guard<std::mutex> lk(mu);
    conns.erase(c);
    if (auto it = per_client.find(client); it != per_client.end() && --it->second == 0) per_client.erase(it);
    cv.notify_all();
  }
  size_t open_connections() {
    std::lock_guard<std::mutex> lk(mu);
    return conns.size();
  }
  template <typename F>
  void for_each_connection(F f) {
    std::vector<std::shared_ptr<Connection>> live;
    {
      std::lock_guard<std::mutex> lk(mu);
      for (auto& [p, w] : conns)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& c : live) f(c);
  }
};

}  // namespace gpuopt::net
