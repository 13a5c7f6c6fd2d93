// RequestTracer: sampled requests as Chrome trace async slices (request_trace.h).
#include "server/request_trace.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <iterator>

namespace gpuopt::server {

Result<std::unique_ptr<RequestTracer>> RequestTracer::open(const std::string& path, int rate) {
  if (rate < 1) return Status::InvalidArgument("--trace-rate {}: must be 1 or more (trace one request in N)", rate);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::InvalidArgument("--trace-file '{}': {}", path, std::strerror(errno));
  std::fputs("[\n", f);
  std::fputs(R"({"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "gpuopt serve"}})", f);
  std::fflush(f);
  return std::unique_ptr<RequestTracer>(new RequestTracer(f, rate));
}

RequestTracer::~RequestTracer() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fputs("\n]\n", f_);
  std::fclose(f_);
}

namespace {
const char* const kStages[] = {"network in",     "decode", "queue",  "compute input", "compute infer",
                               "compute output", "encode", "network out"};
constexpr uint64_t kKeepNs = 60'000'000'000ull;
}  // namespace

int RequestTracer::lane(int stage, uint64_t start, uint64_t end, std::string* out) {
  if (lanes_.empty()) lanes_.resize(std::size(kStages));
  auto& ls = lanes_[static_cast<size_t>(stage)];
  size_t k = 0;
  for (; k < ls.size(); ++k) {
    auto& m = ls[k];
    while (!m.empty() && m.begin()->second + kKeepNs < start) m.erase(m.begin());
    auto after = m.lower_bound(start);
    if (after != m.end() && after->first < end) continue;          // the next slice starts inside
    if (after != m.begin() && std::prev(after)->second > start) continue;  // the previous one ends inside
    break;
  }
  if (k == ls.size()) ls.emplace_back();
  ls[k][start] = end;
  auto [it, fresh] = tids_.emplace(std::make_pair(stage, k), 0);
  if (fresh) {
    it->second = next_tid_++;
    const std::string name = k == 0 ? kStages[stage] : std::string(kStages[stage]) + " " + std::to_string(k + 1);
    *out += ",\n" + nlohmann::json({{"ph", "M"}, {"pid", 1}, {"tid", it->second}, {"name", "thread_name"},
                                    {"args", {{"name", name}}}}).dump();
    *out += ",\n" + nlohmann::json({{"ph", "M"}, {"pid", 1}, {"tid", it->second}, {"name", "thread_sort_index"},
                                    {"args", {{"sort_index", stage * 1000 + static_cast<int>(k)}}}}).dump();
  }
  return it->second;
}

void RequestTracer::record(const std::string& model, const RequestMoments& m, const Timing& t, bool ok) {
  // Queue and compute are durations the batcher measured, laid end to end from the hand-off.
  const uint64_t q0 = m.submitted_ns, q1 = q0 + t.queue_ns, c1 = q1 + t.compute_input_ns, c2 = c1 + t.compute_infer_ns,
                 c3 = c2 + t.compute_output_ns;
  const uint64_t bounds[][2] = {{m.received_ns, m.arrived_ns}, {m.arrived_ns, m.submitted_ns}, {q0, q1}, {q1, c1},
                                {c1, c2}, {c2, c3}, {m.answered_ns, m.encoded_ns}, {m.encoded_ns, m.written_ns}};
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  std::string out;
  for (int s = 0; s < static_cast<int>(std::size(kStages)); ++s) {
    const uint64_t a = bounds[s][0], b = bounds[s][1];
    if (b < a || a == 0 || (s >= 2 && s <= 5 && !ok && b == a)) continue;  // a stage it never reached
    const int tid = lane(s, a, std::max(b, a + 1), &out);
    out += ",\n" + nlohmann::json({{"ph", "X"},
                                   {"pid", 1},
                                   {"tid", tid},
                                   {"cat", kStages[s]},
                                   {"name", model},
                                   {"ts", static_cast<double>(a) / 1e3},
                                   {"dur", static_cast<double>(b - a) / 1e3},
                                   {"args", {{"request", id}, {"batch_rows", t.batch_rows}, {"ok", ok}}}})
                        .dump();
  }
  std::fputs(out.c_str(), f_);
  std::fflush(f_);
}

}  // namespace gpuopt::server
