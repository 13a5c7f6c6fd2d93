// libFuzzer target: a KServe v2 body with Triton's binary tensor extension. Bytes 0-3 (little
// endian) are the Inference-Header-Content-Length, the rest the body (JSON header + binary
// blobs); a length past the body is passed as is, so the decoder's own check is fuzzed too.
// The same body goes through the response decoder.
#include "server/kserve.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t header_length = data[0] | (size_t{data[1]} << 8) | (size_t{data[2]} << 16) | (size_t{data[3]} << 24);
  const std::string_view body(reinterpret_cast<const char*>(data) + 4, size - 4);
  auto r = gpuopt::server::decode_infer_request(body, header_length);
  if (r.ok())
    for (const auto& in : r->inputs) (void)in.tensor.nbytes();
  (void)gpuopt::server::decode_infer_response(body, header_length);
  return 0;
}
