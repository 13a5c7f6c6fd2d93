// KServe v2 inference protocol codec: JSON tensors and Triton's binary tensor extension.
//
//   // body = JSON header (+ binary blobs when Inference-Header-Content-Length is given)
//   GPUOPT_ASSIGN_OR_RETURN(InferRequest req, decode_infer_request(body, header_length));
//   ... run ...
//   EncodedResponse out = encode_infer_response(meta, outputs, req);
//   // out.body; out.json_length is the Inference-Header-Content-Length when out.binary
//
// Every KServe datatype is handled: BOOL, UINT8..64, INT8..64, FP16, BF16, FP32, FP64, BYTES
// (binary BYTES elements are a 4-byte little-endian length followed by the bytes). Errors are
// InvalidArgument with a message naming the input and what is wrong.
//
// The JSON header is read with a streaming (SAX) parser: numbers of a tensor's `data` go straight
// into the typed tensor when `datatype` and `shape` came before `data` in its object (as every
// real client sends them), otherwise into a compact buffer converted once; no JSON DOM of the
// data is ever built. DecodeLimits bounds nesting, tensor count and size, and memory.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "net/http.h"
#include "server/shared_memory.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::server {

// Limits on what one request can make the decoder do (docs/server.md lists each).
constexpr size_t kMaxJsonDepth = 64;                         // nested arrays/objects (400 above)
constexpr int64_t kMaxElementsPerTensor = int64_t{1} << 28;  // (400 above)
constexpr size_t kMaxTensorsPerRequest = 1024;               // inputs, and requested outputs (400 above)
constexpr size_t kMaxRequestMemory = size_t{512} << 20;      // bytes the decoded request may hold
constexpr size_t kMaxJsonStructureMemory = size_t{16} << 20;  // of it, the JSON besides tensor data (413 above)

struct DecodeLimits {
  size_t max_json_depth = kMaxJsonDepth;
  int64_t max_elements_per_tensor = kMaxElementsPerTensor;
  size_t max_tensors = kMaxTensorsPerRequest;
  // Tensors, compact buffers and JSON values the decoder allocates (an estimate, never below the
  // tensor bytes); over it the error is StatusCode::kOutOfMemory, which the server answers 413.
  size_t max_memory_bytes = kMaxRequestMemory;
  // Of that, what the JSON besides the tensors' data (names, shapes, parameters, outputs) may
  // take; over it the error is also kOutOfMemory.
  size_t max_structure_bytes = kMaxJsonStructureMemory;
  // Server-wide: what decoding allocates is also taken from here (in 1 MiB steps); when it is
  // exhausted the error is StatusCode::kUnavailable (503). Null = no server-wide budget.
  std::shared_ptr<net::ByteBudget> inflight;
};

struct InferInput {
  std::string name;
  Tensor tensor;  // host tensor with the request's shape and dtype (empty while `shm` is unresolved)
  // Shared-memory extension: the data is in a registered region; the server reads it (as
  // `dtype` and `shape`) before the request runs.
  std::optional<ShmRef> shm;
  DType dtype = DType::Undefined;
  Shape shape;
};

struct RequestedOutput {
  std::string name;
  std::optional<bool> binary;  // parameters.binary_data; unset = request default
  std::optional<ShmRef> shm;   // written to this region instead of the response
};

struct InferRequest {
  std::string id;
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<InferInput> inputs;
  std::vector<RequestedOutput> outputs;  // empty = every output
  bool binary_output_default = false;    // parameters.binary_data_output
  std::optional<uint64_t> timeout_us;    // parameters.timeout (microseconds)
  std::optional<uint32_t> priority;      // parameters.priority
  size_t memory_bytes = 0;               // what decoding allocated (counted against the limits)
  std::shared_ptr<void> memory_hold;     // DecodeLimits::inflight bytes, given back when dropped
};

// JSON text of a reply: bytes that are not valid UTF-8 in a string (a model's name or a message
// from outside) become U+FFFD instead of an exception.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `header_length`: value of Inference-Header-Content-Length (nullopt = the whole body is JSON).
Result<InferRequest> decode_infer_request(std::string_view body, std::optional<size_t> header_length,
                                          const DecodeLimits& limits);
// Zero-copy form for a body the caller hands over: binary tensors (all but BYTES) view its bytes
// instead of being copied out, each at a 64-byte aligned address (a blob that is not is moved back
// into the parsed JSON header's bytes, in place); the tensors keep the body alive. JSON tensors
// are decoded as above. The body's text changes (blobs move): read it only through the result.
Result<InferRequest> decode_infer_request(std::shared_ptr<std::string> body, std::optional<size_t> header_length,
                                          const DecodeLimits& limits);
// The same over a body the caller hands over as bytes `keep` owns (the HTTP layer's body read
// straight from the socket, net::BodyBuffer, laid out so its binary tensors are already aligned).
Result<InferRequest> decode_infer_request(char* data, size_t size, std::shared_ptr<void> keep,
                                          std::optional<size_t> header_length, const DecodeLimits& limits);
inline Result<InferRequest> decode_infer_request(std::string_view body, std::optional<size_t> header_length) {
  return decode_infer_request(body, header_length, DecodeLimits{});
}

struct ResponseMeta {
  std::string model_name;
  std::string model_version;
  std::string id;
};

struct EncodedResponse {
  std::string body;
  bool binary = false;  // true: send Inference-Header-Content-Length: json_length
  size_t json_length = 0;
  // With `binary_tail`: the binary outputs' bytes, in order, to send after `body` from the
  // tensors themselves instead of copied into it (the response body is body + these).
  std::vector<Tensor> tail;
};

// `outputs` in the order they should appear (the caller already applied the selection).
// `shm` (empty, or one per output): outputs written to shared memory get their name, datatype,
// shape and region parameters but no data.
EncodedResponse encode_infer_response(const ResponseMeta& meta,
                                      const std::vector<std::pair<std::string, Tensor>>& outputs,
                                      const std::vector<bool>& binary,
                                      const std::vector<std::optional<ShmRef>>& shm = {},
                                      bool binary_tail = false);

// Encodes a request (used by `gpuopt perf` and the tests): JSON tensors, or binary blobs after
// the JSON header when `binary_inputs`. Returns the body; *json_length gets the header length.
std::string encode_infer_request(const std::vector<std::pair<std::string, Tensor>>& inputs, bool binary_inputs,
                                 bool binary_outputs, const std::string& id, size_t* json_length);

// The binary extension's bytes of one tensor (BYTES: a 4-byte little-endian length before each
// element); gRPC's raw contents and shared-memory regions use the same framing.
size_t tensor_wire_size(const Tensor& t);
void append_tensor_wire(std::string* out, const Tensor& t);
// Fills `t` (already shaped) from those bytes; InvalidArgument naming input `name` when they do
// not match its size.
Status tensor_from_wire(Tensor* t, std::string_view bytes, const std::string& name);

// Decodes a response produced by encode_infer_response (perf and tests check results with it).
Result<std::vector<std::pair<std::string, Tensor>>> decode_infer_response(std::string_view body,
                                                                          std::optional<size_t> header_length);

}  // namespace gpuopt::server
