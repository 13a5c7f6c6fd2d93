// KServe v2 request decoding (JSON + binary extension), and the response decoder `gpuopt perf`
// and the tests use (the same tensor framing under "outputs").
#include "server/kserve.h"

#include <cstdint>
#include <cstring>

#include "server/kserve_sax.h"

namespace gpuopt::server {
namespace {

using detail::MemoryCharge;
using detail::ParsedHeader;
using detail::TensorSpec;
using nlohmann::json;

Status fill_binary(Tensor* t, std::string_view blob, const std::string& name) {
  if (t->dtype() == DType::String) {
    auto& s = t->strings();
    size_t pos = 0;
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (pos + 4 > blob.size())
        return Status::InvalidArgument("input '{}': binary BYTES data ends inside element {} of {}", name, i,
                                       t->numel());
      uint32_t len;
      std::memcpy(&len, blob.data() + pos, 4);
      pos += 4;
      if (len > blob.size() - pos)
        return Status::InvalidArgument("input '{}': binary BYTES element {} claims {} bytes, {} remain", name, i, len,
                                       blob.size() - pos);
      s[static_cast<size_t>(i)].assign(blob.data() + pos, len);
      pos += len;
    }
    if (pos != blob.size())
      return Status::InvalidArgument("input '{}': {} bytes of binary BYTES data left after {} elements", name,
                                     blob.size() - pos, t->numel());
    return Status::Ok();
  }
  if (blob.size() != t->nbytes())
    return Status::InvalidArgument("input '{}': shape {} of {} needs {} bytes but binary_data_size is {}", name,
                                   shape_to_string(t->shape()), dtype_kserve_name(t->dtype()), t->nbytes(),
                                   blob.size());
  if (blob.size()) std::memcpy(t->raw(), blob.data(), blob.size());
  if (t->dtype() == DType::Bool) {
    auto* b = static_cast<uint8_t*>(t->raw());
    for (size_t i = 0; i < blob.size(); ++i) b[i] = b[i] != 0;  // any non-zero byte is true
  }
  return Status::Ok();
}

Result<uint64_t> get_uint(const json& v, const char* what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return Status::InvalidArgument("parameter '{}' must be a non-negative integer", what);
}

// parameters shared_memory_region / _offset / _byte_size of one tensor; nullopt when absent.
Result<std::optional<ShmRef>> shm_ref(const json& params, const std::string& name) {
  auto it = params.find("shared_memory_region");
  if (it == params.end()) {
    if (params.contains("shared_memory_byte_size") || params.contains("shared_memory_offset"))
      return Status::InvalidArgument("'{}': shared_memory_byte_size/offset given without shared_memory_region", name);
    return std::optional<ShmRef>();
  }
  if (!it->is_string()) return Status::InvalidArgument("'{}': shared_memory_region must be a string", name);
  ShmRef r;
  r.region = it->get<std::string>();
  auto bs = params.find("shared_memory_byte_size");
  if (bs == params.end()) return Status::InvalidArgument("'{}': shared_memory_byte_size is missing", name);
  GPUOPT_ASSIGN_OR_RETURN(r.byte_size, get_uint(*bs, "shared_memory_byte_size"));
  if (auto off = params.find("shared_memory_offset"); off != params.end()) {
    GPUOPT_ASSIGN_OR_RETURN(r.offset, get_uint(*off, "shared_memory_offset"));
  }
  return std::optional<ShmRef>(std::move(r));
}

// The tensors of h.dom[list_key] (request inputs, response outputs); binary blobs follow the
// JSON header in order.
// Where the blob [off, off + n) of an owned body can be viewed at an address aligned to `align`:
// where it is when it already is, otherwise moved back into bytes nothing needs any more (the
// parsed JSON header, the gaps left by earlier blobs: everything before *free_from). npos when it
// would not fit there.
constexpr size_t kNoRoom = std::string::npos;
size_t align_in_body(char* base, size_t off, size_t n, size_t align, size_t* free_from) {
  auto misalign = [&](size_t o) { return reinterpret_cast<uintptr_t>(base + o) % align; };
  if (misalign(off) == 0) {
    *free_from = off + n;
    return off;
  }
  const size_t to = *free_from + (align - misalign(*free_from)) % align;
  if (to > off) return kNoRoom;
  std::memmove(base + to, base + off, n);
  *free_from = to + n;
  return to;
}

// The request body as the HTTP layer read it, owned: binary tensors view it (Body::storage keeps
// it alive) instead of being copied out.
struct OwnedBody {
  char* base = nullptr;
  size_t size = 0;
  std::shared_ptr<void> keep;        // owns base
  std::shared_ptr<Storage> storage;  // over the body's bytes; made with the first view
  size_t free_from = 0;              // bytes before this are not needed (set past the header)

  // A tensor of `spec` over the blob at `off`, or an undefined tensor when it cannot be placed.
  Tensor view(const TensorSpec& spec, size_t off, size_t n) {
    size_t at = align_in_body(base, off, n, 64, &free_from);
    if (at == kNoRoom) at = align_in_body(base, off, n, dtype_size(spec.dtype), &free_from);
    if (at == kNoRoom) return Tensor();
    if (!storage) {
      storage = std::make_shared<Storage>();
      storage->data = base;
      storage->bytes = size;
      storage->deleter = [k = keep](void*) {};  // the body lives as long as a tensor views it
    }
    return Tensor::wrap(spec.dtype, spec.shape, storage, at);
  }
};

Result<std::vector<InferInput>> decode_tensors(ParsedHeader& h, const json& list, std::string_view body, size_t hlen,
                                               const DecodeLimits& limits, MemoryCharge* mem,
                                               OwnedBody* owned = nullptr) {
  std::vector<InferInput> out;
  size_t offset = hlen;
  if (owned) owned->free_from = 0;  // the header is parsed: its bytes are free
  for (size_t idx = 0; idx < list.size(); ++idx) {
    const json& in = list[idx];
    GPUOPT_ASSIGN_OR_RETURN(TensorSpec spec, detail::tensor_spec(in));
    const std::string& name = spec.name;
    for (const auto& prev : out)
      if (prev.name == name) return Status::InvalidArgument("input '{}' is given twice", name);
    std::optional<uint64_t> binary_size;
    if (auto pit = in.find("parameters"); pit != in.end()) {
      if (!pit->is_object()) return Status::InvalidArgument("input '{}': 'parameters' must be an object", name);
      if (auto b = pit->find("binary_data_size"); b != pit->end()) {
        GPUOPT_ASSIGN_OR_RETURN(uint64_t n, get_uint(*b, "binary_data_size"));
        binary_size = n;
      }
      GPUOPT_ASSIGN_OR_RETURN(auto shm, shm_ref(*pit, name));
      if (shm) {
        if (binary_size) return Status::InvalidArgument("input '{}' has both binary_data_size and shared memory", name);
        if (idx < h.data.size() && h.data[idx]) return Status::InvalidArgument("input '{}' has both 'data' and shared memory", name);
        InferInput x;
        x.name = name;
        x.shm = std::move(shm);
        x.dtype = spec.dtype;
        x.shape = spec.shape;
        out.push_back(std::move(x));
        continue;
      }
    }
    std::optional<detail::TensorData>* data = idx < h.data.size() && h.data[idx] ? &h.data[idx] : nullptr;
    if (binary_size && data) return Status::InvalidArgument("input '{}' has both 'data' and binary_data_size", name);
    InferInput x;
    x.name = name;
    if (!binary_size) {
      if (!data) return Status::InvalidArgument("input '{}' has neither 'data' nor parameters.binary_data_size", name);
      GPUOPT_ASSIGN_OR_RETURN(x.tensor, detail::finish_data(std::move(**data), spec, mem));
      data->reset();
      out.push_back(std::move(x));
      continue;
    }
    // Size checks come before allocation so a forged shape cannot make us allocate.
    if (*binary_size > body.size() - offset)
      return Status::InvalidArgument("input '{}': binary_data_size {} runs past the end of the body ({} bytes left)",
                                     name, *binary_size, body.size() - offset);
    if (spec.dtype != DType::String && static_cast<uint64_t>(spec.numel) * dtype_size(spec.dtype) != *binary_size)
      return Status::InvalidArgument("input '{}': shape {} of {} needs {} bytes but binary_data_size is {}", name,
                                     shape_to_string(spec.shape), spec.datatype, spec.numel * dtype_size(spec.dtype),
                                     *binary_size);
    if (spec.dtype == DType::String && static_cast<uint64_t>(spec.numel) > *binary_size / 4)
      return Status::InvalidArgument("input '{}': {} BYTES elements cannot fit in {} bytes", name, spec.numel,
                                     *binary_size);
    if (spec.numel > limits.max_elements_per_tensor)
      return Status::InvalidArgument("input '{}': more than {} elements in one tensor (the limit per tensor)", name,
                                     limits.max_elements_per_tensor);
    GPUOPT_RETURN_IF_ERROR(mem->charge(spec.dtype == DType::String
                                           ? static_cast<size_t>(spec.numel) * sizeof(std::string) + *binary_size
                                           : *binary_size));
    if (owned && spec.dtype != DType::String && *binary_size > 0) x.tensor = owned->view(spec, offset, *binary_size);
    if (x.tensor.defined()) {  // zero-copy: the tensor is the body's bytes
      if (spec.dtype == DType::Bool) {
        auto* b = static_cast<uint8_t*>(x.tensor.raw());
        for (size_t i = 0; i < *binary_size; ++i) b[i] = b[i] != 0;  // any non-zero byte is true
      }
    } else {
      x.tensor = Tensor::empty(spec.dtype, spec.shape);
      GPUOPT_RETURN_IF_ERROR(fill_binary(&x.tensor, body.substr(offset, *binary_size), name));
    }
    offset += *binary_size;
    out.push_back(std::move(x));
  }
  if (offset != body.size())
    return Status::InvalidArgument("{} bytes after the JSON header are not claimed by any binary_data_size",
                                   body.size() - offset);
  return out;
}

Result<ParsedHeader> read_json_header(std::string_view body, std::optional<size_t> header_length, const char* list_key,
                                      const char* what, const DecodeLimits& limits, MemoryCharge* mem, size_t* hlen) {
  *hlen = header_length.value_or(body.size());
  if (*hlen > body.size())
    return Status::InvalidArgument("Inference-Header-Content-Length {} is larger than the body ({} bytes)", *hlen,
                                   body.size());
  return detail::read_header(body.substr(0, *hlen), list_key, what, body.size(), limits, mem);
}

}  // namespace

namespace {

Result<InferRequest> decode_request(std::string_view body, std::optional<size_t> header_length,
                                    const DecodeLimits& limits, OwnedBody* owned) {
  MemoryCharge mem(limits);
  size_t hlen = 0;
  GPUOPT_ASSIGN_OR_RETURN(ParsedHeader h,
                          read_json_header(body, header_length, "inputs", "request", limits, &mem, &hlen));
  const json& j = h.dom;
  if (!j.is_object()) return Status::InvalidArgument("request JSON must be an object");
  InferRequest req;
  if (auto it = j.find("id"); it != j.end()) {
    if (!it->is_string()) return Status::InvalidArgument("'id' must be a string");
    req.id = it->get<std::string>();
  }
  if (auto it = j.find("parameters"); it != j.end()) {
    if (!it->is_object()) return Status::InvalidArgument("'parameters' must be an object");
    req.parameters = *it;
    for (auto& [k, v] : it->items()) {
      if (k == "binary_data_output") {
        if (!v.is_boolean()) return Status::InvalidArgument("parameter 'binary_data_output' must be a boolean");
        req.binary_output_default = v.get<bool>();
      } else if (k == "timeout") {
        GPUOPT_ASSIGN_OR_RETURN(uint64_t t, get_uint(v, "timeout"));
        req.timeout_us = t;
      } else if (k == "priority") {
        GPUOPT_ASSIGN_OR_RETURN(uint64_t p, get_uint(v, "priority"));
        req.priority = static_cast<uint32_t>(p);
      } else if (k == "sequence_id" || k == "sequence_start" || k == "sequence_end") {
        return Status::InvalidArgument("parameter '{}': sequence batching is not supported", k);
      }
    }
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array() || inputs->empty())
    return Status::InvalidArgument("request needs a non-empty 'inputs' array");
  GPUOPT_ASSIGN_OR_RETURN(req.inputs, decode_tensors(h, *inputs, body, hlen, limits, &mem, owned));
  if (auto oit = j.find("outputs"); oit != j.end()) {
    if (!oit->is_array()) return Status::InvalidArgument("'outputs' must be an array");
    if (oit->size() > limits.max_tensors)
      return Status::InvalidArgument("request asks for more than {} outputs (the limit per request)",
                                     limits.max_tensors);
    for (const auto& o : *oit) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return Status::InvalidArgument("each requested output needs a 'name'");
      RequestedOutput r;
      r.name = o["name"].get<std::string>();
      if (auto pit = o.find("parameters"); pit != o.end() && pit->is_object()) {
        if (auto b = pit->find("binary_data"); b != pit->end()) {
          if (!b->is_boolean()) return Status::InvalidArgument("output '{}': binary_data must be a boolean", r.name);
          r.binary = b->get<bool>();
        }
        if (auto cc = pit->find("classification"); cc != pit->end() && !(cc->is_number() && cc->get<double>() == 0))
          return Status::InvalidArgument("output '{}': the classification extension is not supported", r.name);
        GPUOPT_ASSIGN_OR_RETURN(r.shm, shm_ref(*pit, r.name));
      }
      req.outputs.push_back(std::move(r));
    }
  }
  req.memory_bytes = mem.used();
  req.memory_hold = mem.hold();
  return req;
}

}  // namespace

Result<InferRequest> decode_infer_request(std::string_view body, std::optional<size_t> header_length,
                                          const DecodeLimits& limits) {
  return decode_request(body, header_length, limits, nullptr);
}

Result<InferRequest> decode_infer_request(std::shared_ptr<std::string> body, std::optional<size_t> header_length,
                                          const DecodeLimits& limits) {
  OwnedBody owned{body->data(), body->size(), body, nullptr, 0};
  return decode_request(*body, header_length, limits, &owned);
}

Result<InferRequest> decode_infer_request(char* data, size_t size, std::shared_ptr<void> keep,
                                          std::optional<size_t> header_length, const DecodeLimits& limits) {
  OwnedBody owned{data, size, std::move(keep), nullptr, 0};
  return decode_request(std::string_view(data, size), header_length, limits, &owned);
}

Result<std::vector<std::pair<std::string, Tensor>>> decode_infer_response(std::string_view body,
                                                                          std::optional<size_t> header_length) {
  DecodeLimits limits;
  MemoryCharge mem(limits);
  size_t hlen = 0;
  GPUOPT_ASSIGN_OR_RETURN(ParsedHeader h,
                          read_json_header(body, header_length, "outputs", "response", limits, &mem, &hlen));
  const json& j = h.dom;
  if (!j.is_object()) return Status::InvalidArgument("response is not a JSON object");
  if (auto e = j.find("error"); e != j.end()) return Status::InvalidArgument("server error: {}", e->dump());
  auto outs = j.find("outputs");
  if (outs == j.end()) return Status::InvalidArgument("response has no 'outputs'");
  if (!outs->is_array() || outs->empty()) return Status::InvalidArgument("response needs a non-empty 'outputs' array");
  GPUOPT_ASSIGN_OR_RETURN(auto tensors, decode_tensors(h, *outs, body, hlen, limits, &mem));
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& t : tensors) out.emplace_back(std::move(t.name), std::move(t.tensor));
  return out;
}

Status tensor_from_wire(Tensor* t, std::string_view bytes, const std::string& name) {
  return fill_binary(t, bytes, name);
}

}  // namespace gpuopt::server
