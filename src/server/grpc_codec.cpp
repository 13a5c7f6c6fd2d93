// ModelInferRequest -> InferRequest and InferReply -> ModelInferResponse.
#include "server/grpc_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <climits>
#include <cstring>
#include <limits>

namespace gpuopt::server {
namespace {

using inference::InferParameter;
using Params = google::protobuf::Map<std::string, InferParameter>;

Result<uint64_t> param_uint(const InferParameter& p, const std::string& what) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kInt64Param:
      if (p.int64_param() < 0) break;
      return static_cast<uint64_t>(p.int64_param());
    case InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      break;
  }
  return Status::InvalidArgument("parameter '{}' must be a non-negative integer", what);
}

Result<std::optional<ShmRef>> shm_ref(const Params& params, const std::string& name) {
  auto it = params.find("shared_memory_region");
  if (it == params.end()) {
    if (params.count("shared_memory_byte_size") || params.count("shared_memory_offset"))
      return Status::InvalidArgument("'{}': shared_memory_byte_size/offset given without shared_memory_region", name);
    return std::optional<ShmRef>();
  }
  if (it->second.parameter_choice_case() != InferParameter::kStringParam)
    return Status::InvalidArgument("'{}': shared_memory_region must be a string", name);
  ShmRef r;
  r.region = it->second.string_param();
  auto bs = params.find("shared_memory_byte_size");
  if (bs == params.end()) return Status::InvalidArgument("'{}': shared_memory_byte_size is missing", name);
  GPUOPT_ASSIGN_OR_RETURN(r.byte_size, param_uint(bs->second, "shared_memory_byte_size"));
  if (auto off = params.find("shared_memory_offset"); off != params.end()) {
    GPUOPT_ASSIGN_OR_RETURN(r.offset, param_uint(off->second, "shared_memory_offset"));
  }
  return std::optional<ShmRef>(std::move(r));
}

// Copies typed contents into `t`, refusing values the datatype cannot hold.
template <typename To, typename Rep>
Status copy_typed(Tensor* t, const Rep& values, const std::string& name) {
  To* dst = t->data<To>();
  for (int i = 0; i < values.size(); ++i) {
    auto v = values.Get(i);
    if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
      if (v < static_cast<decltype(v)>(std::numeric_limits<To>::min()) ||
          v > static_cast<decltype(v)>(std::numeric_limits<To>::max()))
        return Status::InvalidArgument("input '{}': element {} ({}) does not fit in {}", name, i, v,
                                       dtype_kserve_name(t->dtype()));
    }
    dst[i] = static_cast<To>(v);
  }
  return Status::Ok();
}

// Element count of the typed contents field that `dtype` uses; -1 when the datatype has none.
int64_t typed_count(const inference::InferTensorContents& c, DType dtype) {
  switch (dtype) {
    case DType::Bool: return c.bool_contents_size();
    case DType::I8: case DType::I16: case DType::I32: return c.int_contents_size();
    case DType::I64: return c.int64_contents_size();
    case DType::U8: case DType::U16: case DType::U32: return c.uint_contents_size();
    case DType::U64: return c.uint64_contents_size();
    case DType::F32: return c.fp32_contents_size();
    case DType::F64: return c.fp64_contents_size();
    case DType::String: return c.bytes_contents_size();
    default: return -1;
  }
}

Status fill_typed(Tensor* t, const inference::InferTensorContents& c, const std::string& name) {
  switch (t->dtype()) {
    case DType::Bool: return copy_typed<bool>(t, c.bool_contents(), name);
    case DType::I8: return copy_typed<int8_t>(t, c.int_contents(), name);
    case DType::I16: return copy_typed<int16_t>(t, c.int_contents(), name);
    case DType::I32: return copy_typed<int32_t>(t, c.int_contents(), name);
    case DType::I64: return copy_typed<int64_t>(t, c.int64_contents(), name);
    case DType::U8: return copy_typed<uint8_t>(t, c.uint_contents(), name);
    case DType::U16: return copy_typed<uint16_t>(t, c.uint_contents(), name);
    case DType::U32: return copy_typed<uint32_t>(t, c.uint_contents(), name);
    case DType::U64: return copy_typed<uint64_t>(t, c.uint64_contents(), name);
    case DType::F32: return copy_typed<float>(t, c.fp32_contents(), name);
    case DType::F64: return copy_typed<double>(t, c.fp64_contents(), name);
    case DType::String: {
      auto& s = t->strings();
      for (int i = 0; i < c.bytes_contents_size(); ++i) s[static_cast<size_t>(i)] = c.bytes_contents(i);
      return Status::Ok();
    }
    default:
      return Status::InvalidArgument("input '{}': {} has no typed contents field; send it in raw_input_contents",
                                     name, dtype_kserve_name(t->dtype()));
  }
}

// A tensor over the bytes of `raw` (moved out of the message: a swap, no copy); undefined when
// the bytes are not aligned to the element size (then the caller copies them).
Tensor view_raw(std::string* raw, DType dtype, const Shape& shape) {
  auto keep = std::make_shared<std::string>();
  keep->swap(*raw);
  if (reinterpret_cast<uintptr_t>(keep->data()) % dtype_size(dtype) != 0) {
    keep->swap(*raw);  // back where it was
    return Tensor();
  }
  auto storage = std::make_shared<Storage>();
  storage->data = keep->data();
  storage->bytes = keep->size();
  storage->deleter = [keep](void*) {};  // the bytes live as long as a tensor views them
  return Tensor::wrap(dtype, shape, std::move(storage));
}

// `owned`: the same message, when the caller gives its raw_input_contents up (views, no copy).
Result<InferRequest> decode(const inference::ModelInferRequest& request, inference::ModelInferRequest* owned,
                            const DecodeLimits& limits) {
  // Counted before any entry moves out: the message holds every byte until the answer is out.
  const size_t message_bytes = limits.inflight ? request.ByteSizeLong() : 0;
  InferRequest req;
  req.id = request.id();
  for (const auto& [k, v] : request.parameters()) {
    if (k == "timeout") {
      GPUOPT_ASSIGN_OR_RETURN(uint64_t t, param_uint(v, "timeout"));
      req.timeout_us = t;
    } else if (k == "priority") {
      GPUOPT_ASSIGN_OR_RETURN(uint64_t p, param_uint(v, "priority"));
      req.priority = static_cast<uint32_t>(std::min<uint64_t>(p, std::numeric_limits<uint32_t>::max()));
    } else if (k == "sequence_id" || k == "sequence_start" || k == "sequence_end") {
      return Status::InvalidArgument("parameter '{}': sequence batching is not supported", k);
    }
  }
  const int n_in = request.inputs_size();
  if (n_in == 0) return Status::InvalidArgument("request has no inputs");
  if (static_cast<size_t>(n_in) > limits.max_tensors || static_cast<size_t>(request.outputs_size()) > limits.max_tensors)
    return Status::InvalidArgument("request has more than {} inputs or outputs (the limit per request)",
                                   limits.max_tensors);
  const bool raw = request.raw_input_contents_size() > 0;
  int raw_next = 0;  // raw_input_contents holds one entry per input not in shared memory, in order
  size_t charged = 0;  // bytes the request's tensors hold (the per-request limit)
  size_t copied = 0;   // of those, bytes decoding allocated (not viewed in the message)
  for (const auto& in : request.inputs()) {
    const std::string& name = in.name();
    for (const auto& prev : req.inputs)
      if (prev.name == name) return Status::InvalidArgument("input '{}' is given twice", name);
    auto dtype = dtype_from_kserve(in.datatype());
    if (!dtype) return Status::InvalidArgument("input '{}': unknown datatype '{}'", name, in.datatype());
    Shape shape(in.shape().begin(), in.shape().end());
    int64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0) return Status::InvalidArgument("input '{}': shape {} has a negative dim", name, shape_to_string(shape));
      if (d > 0 && numel > limits.max_elements_per_tensor / d)
        return Status::InvalidArgument("input '{}': more than {} elements in one tensor (the limit per tensor)", name,
                                       limits.max_elements_per_tensor);
      numel *= d;
    }
    InferInput x;
    x.name = name;
    GPUOPT_ASSIGN_OR_RETURN(x.shm, shm_ref(in.parameters(), name));
    if (x.shm) {
      if (in.has_contents()) return Status::InvalidArgument("input '{}' has both contents and shared memory", name);
      x.dtype = *dtype;
      x.shape = std::move(shape);
      req.inputs.push_back(std::move(x));
      continue;
    }
    // Size checks before allocation: a forged shape cannot make us allocate.
    std::string_view bytes;
    int raw_index = -1;
    if (raw) {
      if (in.has_contents())
        return Status::InvalidArgument("input '{}': contents and raw_input_contents cannot be mixed", name);
      if (raw_next >= request.raw_input_contents_size())
        return Status::InvalidArgument("input '{}': raw_input_contents has only {} entries", name,
                                       request.raw_input_contents_size());
      raw_index = raw_next++;
      bytes = request.raw_input_contents(raw_index);
      if (*dtype != DType::String && static_cast<uint64_t>(numel) * dtype_size(*dtype) != bytes.size())
        return Status::InvalidArgument("input '{}': shape {} of {} needs {} bytes but raw_input_contents has {}", name,
                                       shape_to_string(shape), in.datatype(), numel * dtype_size(*dtype), bytes.size());
      if (*dtype == DType::String && static_cast<uint64_t>(numel) > bytes.size() / 4)
        return Status::InvalidArgument("input '{}': {} BYTES elements cannot fit in {} bytes", name, numel,
                                       bytes.size());
    } else {
      int64_t have = typed_count(in.contents(), *dtype);
      if (have < 0)
        return Status::InvalidArgument("input '{}': {} has no typed contents field; send it in raw_input_contents",
                                       name, in.datatype());
      if (have != numel)
        return Status::InvalidArgument("input '{}': shape {} needs {} elements but contents has {}", name,
                                       shape_to_string(shape), numel, have);
    }
    size_t cost = *dtype == DType::String ? static_cast<size_t>(numel) * sizeof(std::string) + bytes.size()
                                          : static_cast<size_t>(numel) * dtype_size(*dtype);
    charged += cost;
    if (charged > limits.max_memory_bytes)
      return Status::OutOfMemory("request needs more than {} bytes of memory (the limit per request)",
                                 limits.max_memory_bytes);
    if (owned && raw && *dtype != DType::String && numel > 0)
      x.tensor = view_raw(owned->mutable_raw_input_contents(raw_index), *dtype, shape);
    if (!x.tensor.defined()) {
      copied += cost;
      GPUOPT_ASSIGN_OR_RETURN(x.tensor, Tensor::try_empty(*dtype, shape, "gRPC input"));
      GPUOPT_RETURN_IF_ERROR(raw ? tensor_from_wire(&x.tensor, bytes, name) : fill_typed(&x.tensor, in.contents(), name));
    }
    req.inputs.push_back(std::move(x));
  }
  if (raw && raw_next != request.raw_input_contents_size())
    return Status::InvalidArgument("raw_input_contents has {} entries for {} inputs", request.raw_input_contents_size(),
                                   raw_next);
  for (const auto& o : request.outputs()) {
    RequestedOutput r;
    r.name = o.name();
    if (auto c = o.parameters().find("classification"); c != o.parameters().end()) {
      auto n = param_uint(c->second, "classification");
      if (!n.ok() || *n != 0)
        return Status::InvalidArgument("output '{}': the classification extension is not supported", r.name);
    }
    GPUOPT_ASSIGN_OR_RETURN(r.shm, shm_ref(o.parameters(), r.name));
    req.outputs.push_back(std::move(r));
  }
  req.memory_bytes = charged;
  if (limits.inflight) {
    // The request message and the tensors decoding allocated, until the answer is out.
    req.memory_hold = limits.inflight->take(copied + message_bytes);
    if (!req.memory_hold)
      return Status::Unavailable("the server's in-flight memory ({} bytes) is in use; retry later",
                                 limits.inflight->capacity());
  }
  return req;
}

}  // namespace

Result<InferRequest> decode_grpc_request(const inference::ModelInferRequest& request, const DecodeLimits& limits) {
  return decode(request, nullptr, limits);
}

Result<InferRequest> decode_grpc_request(inference::ModelInferRequest* request, const DecodeLimits& limits) {
  return decode(*request, request, limits);
}

namespace {

bool in_shm(const InferReply& r, size_t i) { return i < r.shm.size() && r.shm[i]; }

// The response without raw_output_contents: names, outputs' metadata, shared-memory parameters.
void encode_head(const InferReply& reply, inference::ModelInferResponse* out) {
  out->set_model_name(reply.meta.model_name);
  out->set_model_version(reply.meta.model_version);
  out->set_id(reply.meta.id);
  for (size_t i = 0; i < reply.outputs.size(); ++i) {
    const auto& [name, t] = reply.outputs[i];
    auto* o = out->add_outputs();
    o->set_name(name);
    o->set_datatype(std::string(dtype_kserve_name(t.dtype())));
    for (int64_t d : t.shape()) o->add_shape(d);
    if (in_shm(reply, i)) {
      auto& p = *o->mutable_parameters();
      p["shared_memory_region"].set_string_param(reply.shm[i]->region);
      p["shared_memory_offset"].set_int64_param(static_cast<int64_t>(reply.shm[i]->offset));
      p["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(tensor_wire_size(t)));
    }
  }
}

void put_varint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

// Field numbers and wire type 2 (length-delimited) of the two messages written by hand.
constexpr char kRawOutputContentsTag = (6 << 3) | 2;  // ModelInferResponse.raw_output_contents
constexpr char kInferResponseTag = (2 << 3) | 2;      // ModelStreamInferResponse.infer_response

void release_tensor(void* p) { delete static_cast<Tensor*>(p); }

}  // namespace

void encode_grpc_response(InferReply&& reply, inference::ModelInferResponse* out) {
  encode_head(reply, out);
  for (size_t i = 0; i < reply.outputs.size(); ++i) {
    std::string* raw = out->add_raw_output_contents();
    if (in_shm(reply, i)) continue;
    const Tensor& t = reply.outputs[i].second;
    raw->reserve(tensor_wire_size(t));
    append_tensor_wire(raw, t);
  }
}

grpc::ByteBuffer encode_grpc_response_buffer(InferReply&& reply, bool stream) {
  inference::ModelInferResponse head;
  encode_head(reply, &head);
  std::string pending;  // bytes not yet in a slice
  head.AppendToString(&pending);
  std::vector<grpc::Slice> slices;
  size_t total = 0;
  auto flush = [&] {
    if (pending.empty()) return;
    total += pending.size();
    slices.emplace_back(pending);
    pending.clear();
  };
  for (size_t i = 0; i < reply.outputs.size(); ++i) {
    const Tensor& t = reply.outputs[i].second;
    const size_t n = in_shm(reply, i) ? 0 : tensor_wire_size(t);
    pending.push_back(kRawOutputContentsTag);  // an empty entry for a shared-memory output keeps the indices
    put_varint(&pending, n);
    if (n == 0) continue;
    if (t.dtype() == DType::String || !t.is_cpu()) {  // BYTES needs its framing
      append_tensor_wire(&pending, t);
      continue;
    }
    flush();
    // The slice reads the output tensor's own bytes; grpc drops its reference once they are sent.
    slices.emplace_back(const_cast<void*>(t.raw()), n, release_tensor, new Tensor(t));
    total += n;
  }
  flush();
  if (stream) {
    std::string wrap(1, kInferResponseTag);
    put_varint(&wrap, total);
    slices.insert(slices.begin(), grpc::Slice(wrap));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer encode_stream_error(std::string_view message) {
  inference::ModelStreamInferResponse r;
  r.set_error_message(grpc_message(message));
  grpc::Slice s(r.SerializeAsString());
  return grpc::ByteBuffer(&s, 1);
}

grpc::Status to_grpc_status(const Status& s) {
  using grpc::StatusCode;
  StatusCode c = StatusCode::INTERNAL;
  switch (s.code()) {
    case gpuopt::StatusCode::kOk: return grpc::Status::OK;
    case gpuopt::StatusCode::kInvalidArgument: c = StatusCode::INVALID_ARGUMENT; break;
    case gpuopt::StatusCode::kNotFound: c = StatusCode::NOT_FOUND; break;
    case gpuopt::StatusCode::kUnimplemented: c = StatusCode::UNIMPLEMENTED; break;
    case gpuopt::StatusCode::kOutOfMemory: c = StatusCode::RESOURCE_EXHAUSTED; break;
    case gpuopt::StatusCode::kUnavailable: c = StatusCode::UNAVAILABLE; break;
    case gpuopt::StatusCode::kDeadlineExceeded: c = StatusCode::DEADLINE_EXCEEDED; break;
    case gpuopt::StatusCode::kAlreadyExists: c = StatusCode::ALREADY_EXISTS; break;
    case gpuopt::StatusCode::kFailedPrecondition: c = StatusCode::FAILED_PRECONDITION; break;
    case gpuopt::StatusCode::kInternal: c = StatusCode::INTERNAL; break;
  }
  // The message travels as a header (grpc-message): a message that echoes a client's long name
  // would pass the client's metadata limit and hide the real error behind a transport one.
  return grpc::Status(c, grpc_message(s.message()));
}

std::string grpc_message(std::string_view m) {
  if (m.size() <= kMaxGrpcMessageBytes && net::valid_utf8(m)) return std::string(m);
  return net::printable(m, kMaxGrpcMessageBytes);
}

Status parse_infer_request(google::protobuf::io::ZeroCopyInputStream* in, size_t size,
                           inference::ModelInferRequest* out) {
  out->Clear();
  if (size > static_cast<size_t>(INT_MAX) || !in)
    return Status::InvalidArgument("the ModelInferRequest message of {} bytes is over protobuf's 2 GiB limit", size);
  google::protobuf::io::CodedInputStream coded(in);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!out->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return Status::InvalidArgument(
        "the request is not a valid ModelInferRequest protobuf message ({} bytes: truncated, a wrong wire type, or "
        "a string field that is not UTF-8)",
        size);
  return Status::Ok();
}

Status parse_infer_request(std::string_view bytes, inference::ModelInferRequest* out) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return parse_infer_request(nullptr, bytes.size(), out);
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  return parse_infer_request(&stream, bytes.size(), out);
}

}  // namespace gpuopt::server
