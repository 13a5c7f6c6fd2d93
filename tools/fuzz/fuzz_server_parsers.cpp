// libFuzzer target: arbitrary bytes through the server's request parsers. The first byte picks
// the parser, the rest is its input:
//   0  KServe v2 infer request, whole body JSON
//   1  KServe v2 infer request with the binary tensor extension; bytes 1-2 (little-endian) are
//      the Inference-Header-Content-Length, clipped to the body
//   2  infer response decoder (what `gpuopt perf` and the tests read back), JSON and binary
//   3  config.pbtxt (model repository configuration)
//   4  URL percent-decoding of request paths
// Every input must end in a value or a Status, never a crash, a hang or a leak.
#include "net/http.h"
#include "server/kserve.h"
#include "server/model_config.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 5;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto header_length = [&]() -> std::pair<std::optional<size_t>, std::string_view> {
    if (rest.size() < 2) return {std::nullopt, rest};
    size_t len = static_cast<uint8_t>(rest[0]) | (static_cast<size_t>(static_cast<uint8_t>(rest[1])) << 8);
    std::string_view body = rest.substr(2);
    return {len <= body.size() ? len : body.size(), body};
  };
  switch (mode) {
    case 0: {
      auto r = gpuopt::server::decode_infer_request(rest, std::nullopt);
      if (r.ok())
        for (const auto& in : r->inputs) (void)in.tensor.nbytes();
      break;
    }
    case 1: {
      auto [len, body] = header_length();
      (void)gpuopt::server::decode_infer_request(body, len);
      break;
    }
    case 2: {
      auto [len, body] = header_length();
      (void)gpuopt::server::decode_infer_response(body, len);
      (void)gpuopt::server::decode_infer_response(rest, std::nullopt);
      break;
    }
    case 3:
      (void)gpuopt::server::parse_model_config(rest, "fuzz/config.pbtxt");
      break;
    case 4: {
      std::string out;
      (void)gpuopt::net::url_decode(rest, &out);
      break;
    }
  }
  return 0;
}
