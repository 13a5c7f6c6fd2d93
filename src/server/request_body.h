// Memory for a large inference request body, read into it straight from the socket
// (net::ServerOptions::body_buffer): a POST to .../infer with binary tensors
// (Inference-Header-Content-Length) gets a block laid out so that the first binary tensor, right
// after the JSON header, starts 64-byte aligned. Decoding then views the tensors where they are
// (no copy, no move into alignment), and a batch of one request hands that view to the engine.
//
//   net::ServerOptions o;
//   o.body_buffer = infer_body_buffer;
#pragma once

#include "net/http.h"

#include <cstddef>

namespace gpuopt::server {

// Memory for the body of `head` (its request line and headers) of `size` bytes; no data (the
// HTTP layer's default std::string body) for any other request or a malformed header length.
net::BodyBuffer infer_body_buffer(const net::HttpRequest& head, size_t size);

}  // namespace gpuopt::server
