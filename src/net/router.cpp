// Router: method + path-pattern matching, and the small value types of http.h.
#include "net/http.h"

#include <nlohmann/json.hpp>

#include <exception>

namespace gpuopt::net {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Splits "/a/b/c" into {"a","b","c"}; a trailing '/' adds no empty segment.
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view find_header(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool ByteBudget::try_take(size_t bytes) {
  size_t cur = used_.load();
  do {
    if (bytes > capacity_ || cur > capacity_ - bytes) return false;
  } while (!used_.compare_exchange_weak(cur, cur + bytes));
  return true;
}

std::shared_ptr<void> ByteBudget::take(size_t bytes) {
  return try_take(bytes) ? adopt(bytes) : nullptr;
}

std::shared_ptr<void> ByteBudget::adopt(size_t bytes) {
  // A non-null hold even for 0 bytes; the deleter gives the bytes back.
  static char token;
  return std::shared_ptr<void>(&token, [self = shared_from_this(), bytes](void*) { self->give_back(bytes); });
}

std::string_view HttpRequest::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return {};
}

HttpResponse HttpResponse::json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::text(int status, std::string body, std::string content_type) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

HttpResponse HttpResponse::error(int status, std::string_view message) {
  return json(status, nlohmann::json{{"error", std::string(message)}}.dump());
}

bool url_decode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int h = hex_value(in[i + 1]), l = hex_value(in[i + 2]);
    if (h < 0 || l < 0) return false;
    out->push_back(static_cast<char>(h * 16 + l));
    i += 2;
  }
  return true;
}

void Router::add(std::string method, std::string pattern, Handler handler) {
  add_async(std::move(method), std::move(pattern),
            [h = std::move(handler)](HttpRequest&& req, Responder done) { done(h(req)); });
}

void Router::add_async(std::string method, std::string pattern, AsyncHandler handler) {
  Route r;
  r.method = std::move(method);
  for (auto s : split_path(pattern)) r.segments.emplace_back(s);
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

void Router::dispatch(HttpRequest&& req, Responder done) const {
  auto segs = split_path(req.path);
  bool path_matched = false;
  for (const Route& r : routes_) {
    if (r.segments.size() != segs.size()) continue;
    Headers params;
    bool ok = true;
    for (size_t i = 0; i < segs.size() && ok; ++i) {
      const std::string& p = r.segments[i];
      if (p.size() >= 2 && p.front() == '{' && p.back() == '}')
        params.emplace_back(p.substr(1, p.size() - 2), std::string(segs[i]));
      else
        ok = (p == segs[i]);
    }
    if (!ok) continue;
    path_matched = true;
    if (r.method != req.method && !(r.method == "GET" && req.method == "HEAD")) continue;
    req.params = std::move(params);
    try {
      r.handler(std::move(req), done);
    } catch (const std::exception& e) {
      done(HttpResponse::error(500, std::string("internal error: ") + e.what()));
    }
    return;
  }
  if (path_matched) {
    done(HttpResponse::error(405, "method " + req.method + " not allowed for " + req.path));
    return;
  }
  if (not_found_) {
    try {
      done(not_found_(req));
    } catch (const std::exception& e) {
      done(HttpResponse::error(500, std::string("internal error: ") + e.what()));
    }
    return;
  }
  done(HttpResponse::error(404, "no route for " + req.method + " " + req.path));
}

}  // namespace gpuopt::net
