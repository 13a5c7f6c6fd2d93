// infer_body_buffer (request_body.h).
#include "server/request_body.h"

#include <charconv>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace gpuopt::server {

namespace {
bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}
}  // namespace

net::BodyBuffer infer_body_buffer(const net::HttpRequest& head, size_t size) {
  if (head.method != "POST" || !ends_with(head.path, "/infer")) return {};
  const std::string_view h = head.header("Inference-Header-Content-Length");
  size_t hlen = 0;
  if (h.empty() || std::from_chars(h.data(), h.data() + h.size(), hlen).ptr != h.data() + h.size() || hlen > size)
    return {};  // JSON only, or a bad length the decoder reports
  constexpr size_t kAlign = 64;
  const size_t pad = (kAlign - hlen % kAlign) % kAlign;  // the blobs begin at block + pad + hlen
  const size_t bytes = (pad + size + kAlign - 1) / kAlign * kAlign;
  void* block = std::aligned_alloc(kAlign, bytes);
  if (!block) return {};
  net::BodyBuffer b;
  b.data = static_cast<char*>(block) + pad;
  b.size = size;
  b.keep = std::shared_ptr<void>(block, [](void* p) { std::free(p); });
  return b;
}

}  // namespace gpuopt::server
