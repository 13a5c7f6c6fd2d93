#include "server/grpc_guard.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace gpuopt::server {

// grpc++'s callback API answers a unary request whose message does not parse with UNIMPLEMENTED
// and no message; this turns that into INVALID_ARGUMENT naming the method. A unary call's
// message is always present, so a null one after the receive is exactly a parse failure.
namespace {

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(grpc::experimental::ServerRpcInfo* info) : info_(info) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using H = grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(H::POST_RECV_MESSAGE) && m->GetRecvMessage() == nullptr) malformed_ = true;
    if (m->QueryInterceptionHookPoint(H::PRE_SEND_STATUS) && malformed_ &&
        m->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED)
      m->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          fmt::format("the request is not a valid protobuf message for {} (truncated, a wrong wire type, or a "
                      "string field that is not UTF-8)",
                      info_->method())));
    m->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  std::atomic<bool> malformed_{false};  // set and read on grpc threads of one call
};

}  // namespace

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) return nullptr;
  // ModelInfer takes raw bytes and answers a malformed message itself (no interceptor per call).
  if (std::strcmp(info->method(), "/inference.GRPCInferenceService/ModelInfer") == 0) return nullptr;
  return new MalformedRequestInterceptor(info);
}

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
