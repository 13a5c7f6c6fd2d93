// HTTP routes of Triton's shared-memory extensions:
//   GET  /v2/{system,cuda}sharedmemory[/region/{region}]/status
//   POST /v2/{system,cuda}sharedmemory/region/{region}/register
//   POST /v2/{system,cuda}sharedmemory[/region/{region}]/unregister
#include <climits>

#include "server/inference_server.h"

namespace gpuopt::server {

using net::HttpRequest;
using net::HttpResponse;
using nlohmann::json;

namespace {

constexpr size_t kMaxRegisterBody = size_t{64} << 10;

HttpResponse reply(const Status& s) {
  return s.ok() ? HttpResponse::json(200, "") : HttpResponse::error(http_status_for(s), s.message());
}

Result<json> register_body(const HttpRequest& req) {
  if (req.body.size() > kMaxRegisterBody)
    return Status::InvalidArgument("request body of {} bytes is larger than the {} this endpoint accepts",
                                   req.body.size(), kMaxRegisterBody);
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("request body is not a JSON object");
  return j;
}

Result<uint64_t> get_u64(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return Status::InvalidArgument("'{}' is missing", key);
    return uint64_t{0};
  }
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
  return Status::InvalidArgument("'{}' must be a non-negative integer", key);
}

json status_json(const std::vector<ShmRegionInfo>& v, ShmKind kind) {
  json a = json::array();
  for (const auto& r : v) {
    if (kind == ShmKind::kSystem)
      a.push_back({{"name", r.name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}});
    else
      a.push_back({{"name", r.name}, {"device_id", r.device_id}, {"byte_size", r.byte_size}});
  }
  return a;
}

}  // namespace

void InferenceServer::add_shared_memory_routes(net::Router& r) {
  for (ShmKind kind : {ShmKind::kSystem, ShmKind::kCuda}) {
    const std::string base = kind == ShmKind::kSystem ? "/v2/systemsharedmemory" : "/v2/cudasharedmemory";
    auto status = [this, kind](const HttpRequest& q) {
      auto st = shm_.status(kind, std::string(q.param("region")));
      if (!st.ok()) return reply(st.status());
      return HttpResponse::json(200, json_text(status_json(*st, kind)));
    };
    r.get(base + "/status", status);
    r.get(base + "/region/{region}/status", status);
    auto unregister = [this, kind](const HttpRequest& q) {
      shm_.unregister(kind, std::string(q.param("region")));
      return reply(Status::Ok());
    };
    r.post(base + "/unregister", unregister);
    r.post(base + "/region/{region}/unregister", unregister);
    r.post(base + "/region/{region}/register", [this, kind](const HttpRequest& q) {
      std::string name(q.param("region"));
      auto body = register_body(q);
      if (!body.ok()) return reply(body.status());
      const json& j = *body;
      auto size = get_u64(j, "byte_size", true);
      if (!size.ok()) return reply(size.status());
      if (kind == ShmKind::kSystem) {
        auto key = j.find("key");
        if (key == j.end() || !key->is_string()) return reply(Status::InvalidArgument("'key' must be a string"));
        auto offset = get_u64(j, "offset", false);
        if (!offset.ok()) return reply(offset.status());
        return reply(shm_.register_system(name, key->get<std::string>(), *offset, *size));
      }
      auto dev = get_u64(j, "device_id", false);
      if (!dev.ok()) return reply(dev.status());
      if (*dev > INT_MAX) return reply(Status::InvalidArgument("'device_id' {} is out of range", *dev));
      auto h = j.find("raw_handle");
      if (h == j.end() || !h->is_object() || !h->contains("b64") || !(*h)["b64"].is_string())
        return reply(Status::InvalidArgument("'raw_handle' must be {{\"b64\": \"<base64 of the cudaIpcMemHandle_t>\"}}"));
      auto raw = base64_decode((*h)["b64"].get<std::string>());
      if (!raw) return reply(Status::InvalidArgument("'raw_handle.b64' is not valid base64"));
      return reply(shm_.register_cuda(name, *raw, static_cast<int>(*dev), *size));
    });
  }
}

}  // namespace gpuopt::server
