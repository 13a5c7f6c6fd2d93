// gpuopt perf's OpenAI mode, the parts without a server: the SSE splitter (events split across
// reads at every byte, CRLF, multi-line data, comments), the --goodput parser, and the level
// summary's bookkeeping (failed requests, goodput against the SLO). The statistics and the
// schedule are checked against numpy in tests/python/test_llm_perf.py.
#include "cli/perf_llm.h"
#include "cli/perf_llm_http.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuopt::cli::llmperf {
namespace {

std::vector<std::string> split_events(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < stream.size(); i += piece)
    p.feed(std::string_view(stream).substr(i, piece), [&](std::string_view d) { out.emplace_back(d); });
  return out;
}

TEST(PerfLlmSse, EventsWhateverTheReadBoundaries) {
  const std::string stream =
      ": a comment\n\ndata: {\"a\":1}\n\nevent: x\r\ndata:{\"b\":2}\r\n\r\ndata: line1\ndata: line2\n\nid: 7\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"};
  for (size_t piece : {1, 2, 3, 7, 1000}) EXPECT_EQ(split_events(stream, piece), want) << piece;
  // An event without its blank line is not complete yet.
  EXPECT_TRUE(split_events("data: {\"a\":1}\n", 1).empty());
}

TEST(PerfLlmGoodput, ParsesAndRejects) {
  auto slo = parse_goodput({"ttft:500", "itl:12.5", "e2el:2000"});
  ASSERT_TRUE(slo.ok()) << slo.status().to_string();
  EXPECT_EQ(*slo->ttft_ms, 500);
  EXPECT_EQ(*slo->itl_ms, 12.5);
  EXPECT_EQ(*slo->e2e_ms, 2000);
  for (const char* bad : {"ttft", "ttft:", "ttft:abc", "ttft:-1", "ttft:0", "ttft:5ms", "tbt:5", "ttft:inf"}) {
    auto r = parse_goodput({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

Record rec(double sent, double first, double done, std::vector<double> chunks, int64_t out) {
  Record r;
  r.sent = sent;
  r.first_token = first;
  r.done = done;
  r.chunk_times = std::move(chunks);
  r.output_tokens = out;
  r.input_tokens = 10;
  return r;
}

TEST(PerfLlmSummary, FailuresAndGoodput) {
  std::vector<Record> rs = {rec(0.0, 0.1, 0.5, {0.1, 0.3, 0.5}, 3), rec(0.0, 0.4, 0.6, {0.4, 0.5, 0.6}, 3),
                            rec(0.2, 0.25, 1.0, {0.25, 1.0}, 2)};
  Record failed = rec(0.1, -1, 2.0, {}, 0);
  failed.error = "HTTP 500";
  rs.push_back(failed);
  Slo slo;
  slo.ttft_ms = 150;  // requests 0 (100 ms) and 2 (50 ms) meet it
  slo.itl_ms = 300;   // request 2's mean inter-token latency is 750 ms: not good
  Summary s = summarize_level(rs, slo);
  EXPECT_EQ(s.completed, 3u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.good, 1u);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);  // first send to the failed request's end
  EXPECT_DOUBLE_EQ(*s.goodput, 0.5);
  EXPECT_EQ(s.output_tokens, 8);
  EXPECT_EQ(s.input_tokens, 30);
  EXPECT_EQ(s.ttft_ms.count, 3u);
  EXPECT_EQ(s.itl_ms.count, 5u);  // 2 + 2 + 1 gaps
  EXPECT_EQ(s.tpot_ms.count, 3u);
  EXPECT_EQ(s.e2e_ms.count, 3u);
  EXPECT_FALSE(summarize_level(rs, Slo{}).goodput.has_value());
}

TEST(PerfLlmSchedule, ClosedLoopAndInfiniteRateSendAtOnce) {
  NumpyRandom rng(3);
  for (double rate : {0.0, std::numeric_limits<double>::infinity()})
    for (double t : poisson_schedule(rng, 5, rate)) EXPECT_EQ(t, 0.0);
  auto lens = sample_lengths(rng, 1000, 5, 20);  // a wide spread: clamped at 1, never below
  for (auto l : lens) EXPECT_GE(l, 1);
}

}  // namespace
}  // namespace gpuopt::cli::llmperf
