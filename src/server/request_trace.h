// `gpuopt serve --trace-file FILE --trace-rate N`: one of every N inference requests written as
// Chrome trace events (docs/profile.md): one complete event per stage, on that stage's track:
// network in (HTTP: from the request's first byte read until its handler runs), decode (parse
// the body, check it against the model), queue (until its batch formed), compute input /
// compute infer / compute output (the batch's execution), encode (the answer), network out
// (from the answer handed to the connection until its last byte was written; gRPC: until grpc++
// reports the call done). Requests
// in flight together overlap, so a stage's track has lanes ("queue", "queue 2", ...): a slice
// goes on the first lane where it overlaps nothing. The file is a JSON array of events, closed
// when the server stops (a viewer also reads it unclosed, after a crash).
//
//   auto t = RequestTracer::open("serve.trace.json", 10);
//   if (t->sample()) t->record(...);
#pragma once

#include "core/status.h"
#include "server/batcher.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpuopt::server {

// A request's moments on the steady clock (now_ns()).
struct RequestMoments {
  uint64_t received_ns = 0;   // its first byte was read (0: unknown, gRPC)
  uint64_t arrived_ns = 0;    // the handler got the whole request
  uint64_t submitted_ns = 0;  // decoded and handed to the batcher
  uint64_t answered_ns = 0;   // the batcher called back (queue and compute are behind it)
  uint64_t encoded_ns = 0;    // the answer is encoded and handed to the protocol's connection
  uint64_t written_ns = 0;    // its last byte was written (0: unknown or never written)
};

class RequestTracer {
 public:
  static Result<std::unique_ptr<RequestTracer>> open(const std::string& path, int rate);
  ~RequestTracer();  // closes the JSON array
  // True for one request in every `rate` (the first, the (rate+1)-th, ...).
  bool sample() { return counter_.fetch_add(1) % static_cast<uint64_t>(rate_) == 0; }
  void record(const std::string& model, const RequestMoments& m, const Timing& t, bool ok);

 private:
  RequestTracer(std::FILE* f, int rate) : f_(f), rate_(rate) {}
  std::FILE* f_;
  int rate_;
  std::atomic<uint64_t> counter_{0};
  // The lane of a stage's slice; names a new lane's track when it opens one.
  int lane(int stage, uint64_t start, uint64_t end, std::string* out);

  std::mutex mu_;
  uint64_t next_id_ = 1;
  // Per stage, per lane: slices by start -> end (those ending a minute before the newest
  // request are dropped: a request does not outlive that, and memory stays bounded).
  std::vector<std::vector<std::map<uint64_t, uint64_t>>> lanes_;
  int next_tid_ = 1;
  std::map<std::pair<int, size_t>, int> tids_;
};

}  // namespace gpuopt::server
