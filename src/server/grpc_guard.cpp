#include "server/grpc_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpuopt::server {

std::optional<bool> listener_answers(const std::string& host, uint16_t port, int timeout_ms) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (host.empty() || host == "0.0.0.0" || ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
  static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
  if (::send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello) - 1)) return false;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  char b[64];
  return ::recv(fd, b, sizeof(b), 0) > 0;
}

}  // namespace gpuopt::server
