// libFuzzer target: a KServe v2 request body that is all JSON (no Inference-Header-Content-Length),
// through the server's decoder; the same bytes as an infer response (what `gpuopt perf` reads
// back) and as a percent-encoded request path. Every input ends in a value or a Status: no crash,
// no hang, no unbounded recursion or allocation (libFuzzer's -rss_limit_mb catches those).
#include "net/http.h"
#include "server/kserve.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto r = gpuopt::server::decode_infer_request(body, std::nullopt);
  if (r.ok())
    for (const auto& in : r->inputs) (void)in.tensor.nbytes();
  (void)gpuopt::server::decode_infer_response(body, std::nullopt);
  std::string path;
  (void)gpuopt::net::url_decode(body.substr(0, 4096), &path);
  return 0;
}
