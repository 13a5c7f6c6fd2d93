// The HTTP server's accept loop under pressure: how many connections this listener may hold
// (its share of the process's file descriptors), and what it does when accept fails (back off,
// log once a second, shed the oldest waiting connection with a spare descriptor).
#include "core/log.h"
#include "net/server_impl.h"

#include <sys/socket.h>

namespace gpuopt::net {

size_t HttpServer::Impl::descriptor_cap(const ServerOptions& o) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return o.max_connections;
  const size_t limit = static_cast<size_t>(rl.rlim_cur);
  const size_t usable = limit > 2 * kReservedDescriptors ? limit - kReservedDescriptors : limit / 2;
  const size_t cap = std::max<size_t>(8, static_cast<size_t>(static_cast<double>(usable) * o.descriptor_share));
  if (cap < o.max_connections)
    GPUOPT_LOG(info, "http: at most {} connections on port {} ({:.0f}% of the {} file descriptors this process may "
               "open, less {} reserved)", cap, o.port, o.descriptor_share * 100, limit, kReservedDescriptors);
  return std::min(cap, o.max_connections);
}

void HttpServer::Impl::do_accept() {
  asio::io_context& peer = io[next_io++ % io.size()]->ioc;
  // `this`, not shared_from_this(): the pending accept lives in io[0], which this object owns, so
  // a shared pointer here would be a cycle that keeps the server alive after stop(). stop()
  // joins the threads before the last owner can destroy us.
  acceptor->async_accept(peer, [this](beast::error_code ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void HttpServer::Impl::on_accept_error(const beast::error_code& ec) {
  ++accept_failures;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_log >= std::chrono::seconds(1)) {
    GPUOPT_LOG(warn, "http: accept failed: {} ({} time(s) in the last second; backing off)", ec.message(),
               accept_failures);
    accept_failures = 0;
    last_accept_log = now;
  }
  const bool out_of_fds = ec == asio::error::no_descriptors || ec.value() == ENFILE || ec.value() == ENOBUFS ||
                          ec.value() == ENOMEM;
  if (out_of_fds && spare_fd >= 0) {
    // Shed the oldest waiting connection (the client sees it close) with the spare descriptor.
    ::close(spare_fd);
    const int fd = ::accept4(acceptor->native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  // Then wait until a connection is there: out of descriptors, accept fails before it looks at
  // the queue, so retrying blindly would fail (and log) with nobody waiting.
  backoff->expires_after(std::chrono::milliseconds(out_of_fds ? 100 : 10));
  backoff->async_wait([this](beast::error_code e) {
    if (e || stopping.load() || !acceptor->is_open()) return;
    acceptor->async_wait(tcp::acceptor::wait_read, [this](beast::error_code e2) {
      if (e2 || stopping.load() || !acceptor->is_open()) return;
      do_accept();
    });
  });
}

}  // namespace gpuopt::net
