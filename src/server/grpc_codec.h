// KServe v2 gRPC messages (Triton's grpc_service.proto) <-> the server's request and reply:
// the same InferRequest / InferReply the HTTP codec produces and consumes, so both protocols
// share every check after decoding (InferenceServer::submit_infer).
//
//   GPUOPT_ASSIGN_OR_RETURN(InferRequest r, decode_grpc_request(&proto_request, limits));  // views its bytes
//   encode_grpc_response(reply, &proto_response);            // or, zero-copy:
//   grpc::ByteBuffer wire = encode_grpc_response_buffer(std::move(reply));
//   return to_grpc_status(status);
#pragma once

#include "grpc_service.pb.h"
#include "server/inference_server.h"
#include "server/kserve.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

namespace gpuopt::server {

// Inputs from raw_input_contents (one entry per input, in order, with the binary extension's
// framing) or from the typed `contents`; parameters timeout, priority and the shared-memory
// ones. Sizes are checked before anything is allocated; DecodeLimits bound the tensor count,
// elements, per-request memory (kOutOfMemory) and the server-wide budget (kUnavailable).
Result<InferRequest> decode_grpc_request(const inference::ModelInferRequest& request, const DecodeLimits& limits);
// Zero-copy form for a message the caller gives up: each raw_input_contents entry of a numeric
// input is moved out of the message (a string swap, no byte copied) and the input tensor views it
// (the tensor keeps those bytes alive; the message's entry is left empty). An entry whose address
// is not aligned to its element size (a short string kept inside its std::string object) is
// copied as above. BYTES inputs and typed `contents` are decoded as above.
Result<InferRequest> decode_grpc_request(inference::ModelInferRequest* request, const DecodeLimits& limits);

// outputs' metadata and raw_output_contents: each output's bytes are appended once, from the
// output tensor itself, into its entry (reserved at the final size; no intermediate buffer)
// (an empty entry for an output written to shared
// memory, so the indices stay aligned as Triton's client expects).
void encode_grpc_response(InferReply&& reply, inference::ModelInferResponse* out);

// The same response as grpc sends it, without a staging copy: the message's bytes in slices,
// each output's raw_output_contents a slice over the output tensor's own memory (holding the tensor
// until grpc has written it). BYTES outputs and tensors not in host memory are copied once.
// `stream`: wrapped as a ModelStreamInferResponse (its infer_response) for ModelStreamInfer.
grpc::ByteBuffer encode_grpc_response_buffer(InferReply&& reply, bool stream = false);
// A ModelStreamInferResponse with error_message (through grpc_message()).
grpc::ByteBuffer encode_stream_error(std::string_view message);

// Status -> gRPC code as Triton maps them: INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE,
// UNIMPLEMENTED, ALREADY_EXISTS, RESOURCE_EXHAUSTED (per-request memory), INTERNAL.
// The message goes through grpc_message() (it travels as a header).
grpc::Status to_grpc_status(const Status& s);
constexpr size_t kMaxGrpcMessageBytes = 2048;
// A message as it may travel: unchanged when valid UTF-8 and short, else printable() and cut.
std::string grpc_message(std::string_view m);

// A ModelInferRequest from its wire bytes (the raw ModelStreamInfer path and the fuzz target):
// InvalidArgument naming the problem when they are not one.
Status parse_infer_request(std::string_view bytes, inference::ModelInferRequest* out);
// The same from a stream of `size` bytes (a grpc::ByteBuffer's slices, without flattening them).
Status parse_infer_request(google::protobuf::io::ZeroCopyInputStream* in, size_t size,
                           inference::ModelInferRequest* out);

}  // namespace gpuopt::server
