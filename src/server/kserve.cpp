// KServe v2 request decoding (JSON + binary extension).
#include "server/kserve.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"

namespace gpuopt::server {
namespace {

using nlohmann::json;

// Product of dims, refusing negatives and overflow (a request must not make us allocate 2^60).
Result<int64_t> checked_numel(const Shape& s, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return Status::InvalidArgument("input '{}': negative dim {} in shape", name, d);
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return Status::InvalidArgument("input '{}': shape is too large", name);
    n *= d;
  }
  return n;
}

void flatten(const json& j, std::vector<const json*>* out) {
  if (j.is_array()) {
    for (const auto& e : j) flatten(e, out);
  } else {
    out->push_back(&j);
  }
}

template <typename T>
Status store_json(const json& v, T* dst, const std::string& name, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return Status::InvalidArgument("input '{}': element {} is not a boolean (BOOL)", name, i);
    *dst = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return Status::InvalidArgument("input '{}': element {} ({}) is out of range", name, i, u);
      *dst = static_cast<T>(u);
    } else if (v.is_number_integer()) {
      int64_t s = v.get<int64_t>();
      if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (s > 0 && static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
        return Status::InvalidArgument("input '{}': element {} ({}) is out of range", name, i, s);
      *dst = static_cast<T>(s);
    } else {
      return Status::InvalidArgument("input '{}': element {} is not an integer", name, i);
    }
  } else {
    if (!v.is_number()) return Status::InvalidArgument("input '{}': element {} is not a number", name, i);
    *dst = from_f64<T>(v.get<double>());
  }
  return Status::Ok();
}

Status fill_json(Tensor* t, const json& data, const std::string& name) {
  std::vector<const json*> elems;
  elems.reserve(static_cast<size_t>(t->numel()));
  flatten(data, &elems);
  if (static_cast<int64_t>(elems.size()) != t->numel())
    return Status::InvalidArgument("input '{}': shape {} needs {} elements but 'data' has {}", name,
                                   shape_to_string(t->shape()), t->numel(), elems.size());
  if (t->dtype() == DType::String) {
    auto& s = t->strings();
    for (size_t i = 0; i < elems.size(); ++i) {
      if (!elems[i]->is_string())
        return Status::InvalidArgument("input '{}': element {} is not a string (BYTES)", name, i);
      s[i] = elems[i]->get<std::string>();
    }
    return Status::Ok();
  }
  return dispatch_dtype(t->dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* p = t->data<T>();
    for (size_t i = 0; i < elems.size(); ++i)
      GPUOPT_RETURN_IF_ERROR(store_json<T>(*elems[i], p + i, name, static_cast<int64_t>(i)));
    return Status::Ok();
  });
}

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

}  // namespace

Result<InferRequest> decode_infer_request(std::string_view body, std::optional<size_t> header_length) {
  size_t hlen = header_length.value_or(body.size());
  if (hlen > body.size())
    return Status::InvalidArgument("Inference-Header-Content-Length {} is larger than the body ({} bytes)", hlen,
                                   body.size());
  json j = json::parse(body.substr(0, hlen), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("request body is not valid JSON");
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
  size_t offset = hlen;
  for (const auto& in : *inputs) {
    if (!in.is_object()) return Status::InvalidArgument("each input must be an object");
    auto nit = in.find("name");
    if (nit == in.end() || !nit->is_string()) return Status::InvalidArgument("an input has no 'name'");
    std::string name = nit->get<std::string>();
    for (const auto& prev : req.inputs)
      if (prev.name == name) return Status::InvalidArgument("input '{}' is given twice", name);
    auto dit = in.find("datatype");
    if (dit == in.end() || !dit->is_string()) return Status::InvalidArgument("input '{}' has no 'datatype'", name);
    auto dt = dtype_from_kserve(dit->get<std::string>());
    if (!dt) return Status::InvalidArgument("input '{}': unknown datatype '{}'", name, dit->get<std::string>());
    auto sit = in.find("shape");
    if (sit == in.end() || !sit->is_array()) return Status::InvalidArgument("input '{}' has no 'shape' array", name);
    Shape shape;
    for (const auto& d : *sit) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return Status::InvalidArgument("input '{}': shape entries must be non-negative integers", name);
      shape.push_back(d.get<int64_t>());
    }
    if (shape.size() > 16) return Status::InvalidArgument("input '{}': rank {} is too large", name, shape.size());
    GPUOPT_ASSIGN_OR_RETURN(int64_t numel, checked_numel(shape, name));
    std::optional<uint64_t> binary_size;
    if (auto pit = in.find("parameters"); pit != in.end()) {
      if (!pit->is_object()) return Status::InvalidArgument("input '{}': 'parameters' must be an object", name);
      if (auto b = pit->find("binary_data_size"); b != pit->end()) {
        GPUOPT_ASSIGN_OR_RETURN(uint64_t n, get_uint(*b, "binary_data_size"));
        binary_size = n;
      }
      if (pit->contains("shared_memory_region"))
        return Status::InvalidArgument("input '{}': shared memory is not supported over HTTP by gpuopt", name);
    }
    auto data = in.find("data");
    if (binary_size && data != in.end())
      return Status::InvalidArgument("input '{}' has both 'data' and binary_data_size", name);
    // Size checks come before allocation so a forged shape cannot make us allocate.
    if (binary_size) {
      if (*binary_size > body.size() - offset)
        return Status::InvalidArgument("input '{}': binary_data_size {} runs past the end of the body ({} bytes left)",
                                       name, *binary_size, body.size() - offset);
      if (*dt != DType::String && static_cast<uint64_t>(numel) * dtype_size(*dt) != *binary_size)
        return Status::InvalidArgument("input '{}': shape {} of {} needs {} bytes but binary_data_size is {}", name,
                                       shape_to_string(shape), dit->get<std::string>(), numel * dtype_size(*dt),
                                       *binary_size);
      if (*dt == DType::String && static_cast<uint64_t>(numel) > *binary_size / 4)
        return Status::InvalidArgument("input '{}': {} BYTES elements cannot fit in {} bytes", name, numel,
                                       *binary_size);
    } else {
      if (data == in.end())
        return Status::InvalidArgument("input '{}' has neither 'data' nor parameters.binary_data_size", name);
      if (static_cast<uint64_t>(numel) > body.size())  // every JSON element takes at least one byte
        return Status::InvalidArgument("input '{}': shape {} needs {} elements but the request is {} bytes", name,
                                       shape_to_string(shape), numel, body.size());
    }
    InferInput x;
    x.name = name;
    x.tensor = Tensor::empty(*dt, shape);
    if (binary_size) {
      GPUOPT_RETURN_IF_ERROR(fill_binary(&x.tensor, body.substr(offset, *binary_size), name));
      offset += *binary_size;
    } else {
      GPUOPT_RETURN_IF_ERROR(fill_json(&x.tensor, *data, name));
    }
    req.inputs.push_back(std::move(x));
  }
  if (offset != body.size())
    return Status::InvalidArgument("{} bytes after the JSON header are not claimed by any binary_data_size",
                                   body.size() - offset);
  if (auto oit = j.find("outputs"); oit != j.end()) {
    if (!oit->is_array()) return Status::InvalidArgument("'outputs' must be an array");
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
        if (pit->contains("shared_memory_region"))
          return Status::InvalidArgument("output '{}': shared memory is not supported over HTTP by gpuopt", r.name);
      }
      req.outputs.push_back(std::move(r));
    }
  }
  return req;
}

}  // namespace gpuopt::server
