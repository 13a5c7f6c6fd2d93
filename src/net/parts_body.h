// The HTTP server's response body type (server.cpp): a string, then borrowed parts
// (HttpResponse::tail), written in place without copying them into one buffer.
#pragma once

#include "net/http.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::net {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

struct PartsBody {
  struct value_type {
    std::string head;
    std::vector<BodyPart> tail;
  };
  static std::uint64_t size(const value_type& v) {
    std::uint64_t n = v.head.size();
    for (const auto& p : v.tail) n += p.size;
    return n;
  }
  class writer {
   public:
    using const_buffers_type = asio::const_buffer;
    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& body) : body_(body) {}
    void init(beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      while (next_ <= body_.tail.size()) {
        const size_t i = next_++;
        asio::const_buffer b = i == 0 ? asio::buffer(body_.head) : asio::buffer(body_.tail[i - 1].data, body_.tail[i - 1].size);
        if (b.size()) return std::make_pair(b, next_ <= body_.tail.size());
      }
      return boost::none;
    }

   private:
    const value_type& body_;
    size_t next_ = 0;  // 0: head, i: tail[i - 1]
  };
};

}  // namespace gpuopt::net
