// libFuzzer target: an HTTP/1.1 request head (request line and headers, arbitrary bytes) read by
// Beast's parser with the server's header limit, turned into a request as the server does
// (net::fill_request_line) and dispatched through a Router holding the KServe routes' patterns.
// Every answer must be a JSON body that parses (invalid UTF-8 in a path, method or header must
// come back escaped, never as an exception or an abort), with a status the router can give.
#include "net/http.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

namespace http = boost::beast::http;
using gpuopt::net::HttpRequest;
using gpuopt::net::HttpResponse;

// Handlers echo what they were given into their messages, as the server's do (a model name, a
// region name, a header).
HttpResponse echo(const HttpRequest& r) {
  std::string msg = "model '" + std::string(r.param("model")) + "' version '" + std::string(r.param("version")) +
                    "' region '" + std::string(r.param("region")) + "' header '" +
                    std::string(r.header("Inference-Header-Content-Length")) + "' query '" + r.query + "'";
  return HttpResponse::error(400, msg);
}

const gpuopt::net::Router& router() {
  static const gpuopt::net::Router r = [] {
    gpuopt::net::Router x;
    for (const char* p : {"/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/{model}", "/v2/models/{model}/ready",
                          "/v2/models/{model}/config", "/v2/models/{model}/versions/{version}",
                          "/v2/systemsharedmemory/status", "/v2/systemsharedmemory/region/{region}/status"})
      x.get(p, echo);
    for (const char* p : {"/v2/models/{model}/infer", "/v2/models/{model}/versions/{version}/infer",
                          "/v2/repository/models/{model}/load", "/v2/systemsharedmemory/region/{region}/register",
                          "/v2/systemsharedmemory/region/{region}/unregister", "/v2/repository/index"})
      x.post(p, echo);
    return x;
  }();
  return r;
}

void check(const HttpResponse& r) {
  if (r.status != 400 && r.status != 404 && r.status != 405) std::abort();  // 500: a handler threw
  // Throws (and so fails the run) when the body is not valid JSON of valid UTF-8.
  const auto j = nlohmann::json::parse(r.body);
  if (!j.contains("error") || !j["error"].is_string()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(16 << 10);  // the server's default --max-header-bytes
  parser.eager(false);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  HttpRequest req;
  if (!ec && parser.is_header_done()) {
    const auto& msg = parser.get();
    for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    const auto method = msg.method_string();
    const auto target = msg.target();
    if (!gpuopt::net::fill_request_line({method.data(), method.size()}, {target.data(), target.size()}, &req))
      return 0;  // the server's 400
  } else {
    // Not a request head Beast accepts: the raw bytes as a method and a target, for the router's
    // own checks (what a lenient front end could hand on).
    const size_t cut = bytes.find(' ');
    if (!gpuopt::net::fill_request_line(bytes.substr(0, std::min<size_t>(cut, 64)),
                                        cut == std::string_view::npos ? "/" : bytes.substr(cut + 1), &req))
      return 0;
  }
  (void)gpuopt::net::printable(bytes);
  bool answered = false;
  router().dispatch(std::move(req), gpuopt::net::Responder::callback([&](HttpResponse r) {
    answered = true;
    check(r);
  }));
  if (!answered) std::abort();  // every request gets exactly one answer, synchronously here
  return 0;
}
