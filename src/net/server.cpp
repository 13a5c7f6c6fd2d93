// HttpServer: N I/O threads, each running its own io_context; the acceptor lives on the first and
// hands connections out round-robin. A connection stays on its thread for life and handles one
// request at a time, so it needs no strand, and the threads do not share one completion queue.
#include "core/log.h"
#include "net/http.h"
#include "net/parts_body.h"
#include "net/server_impl.h"
#include "net/connection.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace gpuopt::net {


detail::ResponderState::~ResponderState() {
  if (conn && !done.exchange(true)) conn->post_response(HttpResponse::error(500, "the handler gave no response"));
}

void Responder::operator()(HttpResponse response) const {
  if (!state_ || state_->done.exchange(true)) return;
  if (state_->callback) return state_->callback(std::move(response));
  state_->conn->post_response(std::move(response));
}

void Responder::on_client_gone(std::function<void()> f) const {
  if (!state_ || !state_->conn || state_->done.load()) return;
  state_->conn->watch_client(std::move(f));
}

Responder Responder::callback(std::function<void(HttpResponse)> f) {
  auto state = std::make_shared<detail::ResponderState>();
  state->callback = std::move(f);
  return Responder(std::move(state));
}

void HttpServer::Impl::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || stopping.load() || !acceptor->is_open()) return;
  if (ec) return on_accept_error(ec);
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  std::string client = socket.remote_endpoint(ignored).address().to_string();
  auto c = std::make_shared<Connection>(shared_from_this(), std::move(socket), client);
  std::string over;
  {
    std::lock_guard<std::mutex> lk(mu);
    size_t& mine = per_client[client];
    if (conns.size() >= opts.max_connections)
      over = fmt::format("too many connections: {} open (--http-max-connections)", conns.size());
    else if (opts.max_connections_per_client && mine >= opts.max_connections_per_client)
      over = fmt::format("too many connections from {}: {} open (--http-max-connections-per-client)", client, mine);
    conns.emplace(c.get(), c);
    ++mine;
  }
  accepted++;
  if (!over.empty()) {
    rejected++;
    c->reject(over);
  } else {
    c->start();
  }
  do_accept();
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(ServerOptions options, Router router) {
  auto impl = std::make_shared<Impl>(std::move(options), std::move(router));
  beast::error_code ec;
  auto addr = asio::ip::make_address(impl->opts.host, ec);
  if (ec) return Status::InvalidArgument("http: bad listen address '{}': {}", impl->opts.host, ec.message());
  tcp::endpoint ep(addr, impl->opts.port);
  impl->acceptor->open(ep.protocol(), ec);
  if (!ec) impl->acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(ep, ec);
  if (ec) return Status::Unavailable("http: cannot bind {}:{}: {}", impl->opts.host, impl->opts.port, ec.message());
  impl->acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Unavailable("http: cannot listen on {}:{}: {}", impl->opts.host, impl->opts.port, ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  impl->host = impl->opts.host;
  for (auto& t : impl->io) t->work.emplace(t->ioc.get_executor());
  impl->do_accept();
  for (auto& t : impl->io) t->thread = std::thread([c = &t->ioc] { c->run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
}

uint16_t HttpServer::port() const { return impl_->port; }
const std::string& HttpServer::host() const { return impl_->host; }
bool HttpServer::running() const { return !impl_->stopping.load(); }

ServerCounters HttpServer::counters() const {
  ServerCounters c;
  c.connections_accepted = impl_->accepted.load();
  c.connections_rejected = impl_->rejected.load();
  c.requests = impl_->requests.load();
  c.bad_requests = impl_->bad_requests.load();
  c.connections_open = impl_->open_connections();
  return c;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> stop_lk(impl_->stop_mu);
  if (impl_->joined.load()) return;
  impl_->stopping.store(true);
  asio::post(impl_->acceptor->get_executor(), [p = impl_.get()] {  // raw: see do_accept
    beast::error_code ec;
    p->acceptor->close(ec);
    p->backoff->cancel();
  });
  impl_->for_each_connection([](auto& c) { c->on_server_stop(); });
  auto wait_empty = [&](std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lk(impl_->mu);
    return impl_->cv.wait_for(lk, d, [&] { return impl_->conns.empty(); });
  };
  if (!wait_empty(grace)) {
    GPUOPT_LOG(warn, "http: closing {} connection(s) still busy after the grace period", impl_->open_connections());
    impl_->for_each_connection([](auto& c) { c->force_close(); });
    wait_empty(std::chrono::milliseconds(500));
  }
  for (auto& t : impl_->io) {
    t->work.reset();
    t->ioc.stop();
  }
  for (auto& t : impl_->io)
    if (t->thread.joinable()) t->thread.join();
  impl_->joined.store(true);
}

}  // namespace gpuopt::net
