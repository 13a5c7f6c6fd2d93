// gpuopt perf (OpenAI mode): a blocking HTTP/1.1 client that hands a response's body to the
// caller as its bytes arrive (server-sent events), and the SSE event splitter.
//
//   StreamClient c("127.0.0.1", 8000, std::chrono::seconds(600));
//   SseParser sse;
//   auto status = c.post("/v1/completions", body, [&](std::string_view bytes) {
//     sse.feed(bytes, [&](std::string_view data) { /* one event's data: JSON or [DONE] */ });
//   });
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuopt::cli::llmperf {

class StreamClient {
 public:
  StreamClient(std::string host, uint16_t port, std::chrono::milliseconds timeout);
  ~StreamClient();
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;
  // POSTs a JSON body; `on_body` gets the response body piece by piece (chunked encoding
  // removed) as it is read. Returns the HTTP status. One keep-alive connection, reopened when the
  // server closed it.
  Result<int> post(std::string_view target, std::string_view body,
                   const std::function<void(std::string_view)>& on_body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits a text/event-stream into events: calls `on_data` with each event's data (its "data:"
// lines joined by '\n') once the blank line ending it arrived. Comments and other fields are
// skipped; CRLF and LF line ends both work.
class SseParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data);

 private:
  std::string line_, data_;
  bool has_data_ = false;
};

}  // namespace gpuopt::cli::llmperf
