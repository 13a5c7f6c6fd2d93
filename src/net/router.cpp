// Router: method + path-pattern matching, and the small value types of http.h.
#include "net/http.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

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
  std::string m = valid_utf8(message) ? std::string(message) : printable(message, 4 * message.size());
  return json(status, nlohmann::json{{"error", std::move(m)}}.dump());
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += len;
  }
  return true;
}

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 24);
  auto hex = [&](unsigned char c) {
    static const char* digits = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    // The longest valid sequence starting here (1 to 4 bytes); 0: one byte to escape.
    size_t len = c >= 0x20 && c < 0x7F ? 1 : 0;
    for (size_t k = 2; c >= 0x80 && k <= 4 && i + k <= s.size() && !len; ++k)
      if (valid_utf8(s.substr(i, k))) len = k;
    if (out.size() + (len ? len : 4) > max_bytes) break;  // the output, escapes included, stays within
    if (len) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      hex(c);
      ++i;
    }
  }
  if (i < s.size()) out += fmt::format("...({} bytes)", s.size());
  return out;
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

bool fill_request_line(std::string_view method, std::string_view target, HttpRequest* req) {
  req->method = std::string(method);
  req->target = std::string(target);
  const size_t q = target.find('?');
  if (q != std::string_view::npos) req->query = std::string(target.substr(q + 1));
  return url_decode(target.substr(0, q), &req->path);
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
  // Every message below and every handler may echo these into JSON: invalid UTF-8 is the
  // client's error, answered here once rather than thrown on somewhere later.
  if (!valid_utf8(req.method) || !valid_utf8(req.path) || !valid_utf8(req.query)) {
    const char* what = !valid_utf8(req.method) ? "method" : !valid_utf8(req.path) ? "URL path" : "URL query";
    const std::string& bytes = !valid_utf8(req.method) ? req.method : !valid_utf8(req.path) ? req.path : req.query;
    done(HttpResponse::error(400, fmt::format("the request's {} is not valid UTF-8: '{}'", what, printable(bytes))));
    return;
  }
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
    done(HttpResponse::error(405, fmt::format("method {} not allowed for {}", printable(req.method), printable(req.path))));
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
  done(HttpResponse::error(404, fmt::format("no route for {} {}", printable(req.method), printable(req.path))));
}

}  // namespace gpuopt::net
