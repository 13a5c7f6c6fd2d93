// KServe v2 response encoding (and the client-side request encoder that `gpuopt perf` and the
// tests use; their response decoder shares the request decoder in kserve.cpp). The response JSON
// is written directly: it is on the hot path.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/dispatch.h"
#include "server/kserve.h"

namespace gpuopt::server {
namespace {

using nlohmann::json;

void append_json_string(std::string* out, std::string_view s) {
  *out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

void append_shape(std::string* out, const Shape& s) {
  out->push_back('[');
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out->push_back(',');
    fmt::format_to(std::back_inserter(*out), "{}", s[i]);
  }
  out->push_back(']');
}

template <typename T>
void append_value(std::string* out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    *out += v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    fmt::format_to(std::back_inserter(*out), "{}",
                   static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(v));
  } else {
    // Shortest round-trip form; NaN/Infinity as Python's json module writes them.
    double d = to_f64(v);
    if (std::isnan(d)) {
      *out += "NaN";
    } else if (std::isinf(d)) {
      *out += d > 0 ? "Infinity" : "-Infinity";
    } else if constexpr (std::is_same_v<T, double>) {
      fmt::format_to(std::back_inserter(*out), "{}", d);
    } else {
      fmt::format_to(std::back_inserter(*out), "{}", static_cast<float>(d));
    }
  }
}

void append_data(std::string* out, const Tensor& t) {
  out->push_back('[');
  if (t.dtype() == DType::String) {
    const auto& s = t.strings();
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) out->push_back(',');
      append_json_string(out, s[i]);
    }
  } else {
    dispatch_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) out->push_back(',');
        append_value<T>(out, p[i]);
      }
    });
  }
  out->push_back(']');
}

size_t binary_size(const Tensor& t) {
  if (t.dtype() != DType::String) return t.nbytes();
  size_t n = 0;
  for (const auto& s : t.strings()) n += 4 + s.size();
  return n;
}

void append_binary(std::string* out, const Tensor& t) {
  if (t.dtype() != DType::String) {
    out->append(static_cast<const char*>(t.raw()), t.nbytes());
    return;
  }
  for (const auto& s : t.strings()) {
    uint32_t n = static_cast<uint32_t>(s.size());
    char len[4];
    std::memcpy(len, &n, 4);
    out->append(len, 4);
    out->append(s);
  }
}

void append_tensor_header(std::string* out, const std::string& name, const Tensor& t) {
  *out += "{\"name\":";
  append_json_string(out, name);
  *out += ",\"datatype\":\"";
  *out += dtype_kserve_name(t.dtype());
  *out += "\",\"shape\":";
  append_shape(out, t.shape());
}

}  // namespace

EncodedResponse encode_infer_response(const ResponseMeta& meta,
                                      const std::vector<std::pair<std::string, Tensor>>& outputs,
                                      const std::vector<bool>& binary,
                                      const std::vector<std::optional<ShmRef>>& shm, bool binary_tail) {
  EncodedResponse r;
  std::string& out = r.body;
  out.reserve(256);
  out += "{\"model_name\":";
  append_json_string(&out, meta.model_name);
  out += ",\"model_version\":";
  append_json_string(&out, meta.model_version);
  if (!meta.id.empty()) {
    out += ",\"id\":";
    append_json_string(&out, meta.id);
  }
  out += ",\"outputs\":[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [name, t] = outputs[i];
    if (i) out.push_back(',');
    append_tensor_header(&out, name, t);
    if (i < shm.size() && shm[i]) {
      out += ",\"parameters\":{\"shared_memory_region\":";
      append_json_string(&out, shm[i]->region);
      fmt::format_to(std::back_inserter(out), ",\"shared_memory_offset\":{},\"shared_memory_byte_size\":{}}}}}",
                     shm[i]->offset, binary_size(t));
    } else if (binary[i]) {
      r.binary = true;
      fmt::format_to(std::back_inserter(out), ",\"parameters\":{{\"binary_data_size\":{}}}}}", binary_size(t));
    } else {
      out += ",\"data\":";
      append_data(&out, t);
      out.push_back('}');
    }
  }
  out += "]}";
  r.json_length = out.size();
  if (!r.binary) return r;
  auto in_body = [&](size_t i) { return binary[i] && !(i < shm.size() && shm[i]); };
  // By reference only when every such output is plain host bytes (BYTES needs its framing).
  for (size_t i = 0; binary_tail && i < outputs.size(); ++i)
    if (in_body(i) && (outputs[i].second.dtype() == DType::String || !outputs[i].second.is_cpu())) binary_tail = false;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (in_body(i)) {
      if (binary_tail)
        r.tail.push_back(outputs[i].second);
      else
        append_binary(&out, outputs[i].second);
    }
  return r;
}

std::string encode_infer_request(const std::vector<std::pair<std::string, Tensor>>& inputs, bool binary_inputs,
                                 bool binary_outputs, const std::string& id, size_t* json_length) {
  std::string out = "{";
  if (!id.empty()) {
    out += "\"id\":";
    append_json_string(&out, id);
    out += ",";
  }
  out += "\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [name, t] = inputs[i];
    if (i) out.push_back(',');
    append_tensor_header(&out, name, t);
    if (binary_inputs) {
      fmt::format_to(std::back_inserter(out), ",\"parameters\":{{\"binary_data_size\":{}}}}}", binary_size(t));
    } else {
      out += ",\"data\":";
      append_data(&out, t);
      out.push_back('}');
    }
  }
  out += "]";
  if (binary_outputs) out += ",\"parameters\":{\"binary_data_output\":true}";
  out += "}";
  *json_length = out.size();
  if (binary_inputs)
    for (const auto& [name, t] : inputs) append_binary(&out, t);
  return out;
}

size_t tensor_wire_size(const Tensor& t) { return binary_size(t); }
void append_tensor_wire(std::string* out, const Tensor& t) { append_binary(out, t); }

}  // namespace gpuopt::server
