// `gpuopt perf --service-kind openai`: load-tests an OpenAI-compatible server (gpuopt serve, vLLM,
// SGLang, TensorRT-LLM's trtllm-serve) the way genai-perf and `vllm bench serve` do: streaming
// requests to /v1/chat/completions or /v1/completions at a fixed concurrency or at a Poisson
// request rate, synthetic prompts of a given length distribution (or a JSONL file), and TTFT,
// inter-token latency, end-to-end latency, tokens/s and goodput under an SLO.
//
//   gpuopt perf --service-kind openai --endpoint-type chat -u 127.0.0.1:8000 -m llama
//     --tokenizer models/llama --synthetic-input-tokens-mean 128 --output-tokens-mean 128
//     --concurrency 1,64 --num-prompts 256 --goodput ttft:500 itl:50 --json      (one command line)
//
// The statistics and the schedule are plain functions (tests/perf/perf_llm_test.cpp); the
// random draws equal numpy's legacy RandomState for the same seed, so a test can rebuild the
// schedule and the lengths with numpy.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuopt::cli::llmperf {

struct Options {
  std::string model;
  std::string url;                       // host:port (an http:// prefix is dropped)
  std::string endpoint_type = "chat";    // chat or completions
  std::string endpoint;                  // path; default /v1/chat/completions or /v1/completions
  std::vector<int64_t> concurrency;      // closed loop: one level each
  std::vector<double> request_rate;      // open loop (Poisson), requests/s: one level each
  int64_t max_concurrency = 0;           // open loop: requests in flight at most (0: --num-prompts)
  int64_t num_prompts = 100;             // requests per level
  int64_t warmup = 0;                    // requests before each level, not measured
  int64_t input_mean = 128, input_stddev = 0;
  int64_t output_mean = 128, output_stddev = 0;
  std::string tokenizer;                 // tokenizer.json or the folder holding it
  int64_t vocab_size = 1000;             // token-id prompts without a tokenizer: ids in [0, vocab_size)
  std::string input_file;                // JSONL prompts
  bool ignore_eos = false;
  uint64_t seed = 0;
  std::vector<std::string> goodput;      // "ttft:MS", "itl:MS", "e2e:MS"
  double timeout_s = 600;
  bool json = false;
  std::string export_requests;           // per-request JSONL
  bool quiet = false;                    // no progress lines
};

// Registers the OpenAI-mode flags on `perf` (the shared -m and -u stay with cmd_perf.cpp).
void add_options(CLI::App* cmd, const std::shared_ptr<Options>& o);
// Runs every level; returns the exit code (0, 1 runtime error, 2 usage).
int run(const Options& o);

// ---- randomness equal to numpy's legacy RandomState(seed) -----------------------------------

// MT19937 seeded as numpy's RandomState(seed) (init_genrand), with its random_sample()
// (53-bit double), standard_exponential() and standard_normal() (the polar method, one value
// cached), so a test rebuilds every draw with numpy.
class NumpyRandom {
 public:
  explicit NumpyRandom(uint32_t seed) : mt_(seed) {}
  double uniform();                 // random_sample(): [0, 1)
  double exponential();             // standard_exponential(): -log(1 - uniform())
  double normal();                  // standard_normal()
  int64_t integer(int64_t n);       // randint(0, n) for n <= 2^32 (masked rejection, as numpy)

 private:
  std::mt19937 mt_;
  std::optional<double> gauss_;
};

// Arrival offsets in seconds of n requests at `rate` requests/s (Poisson: exponential gaps,
// the first at its gap, as vLLM's and genai-perf's schedules); rate <= 0 or infinite: all at 0.
std::vector<double> poisson_schedule(NumpyRandom& rng, int64_t n, double rate);
// n lengths from normal(mean, stddev) rounded to the nearest integer, at least 1; stddev 0: mean.
std::vector<int64_t> sample_lengths(NumpyRandom& rng, int64_t n, int64_t mean, int64_t stddev);

// ---- statistics -----------------------------------------------------------------------------

// numpy.percentile(v, q) with its default linear interpolation; 0 for an empty v.
double percentile(std::vector<double> v, double q);

struct Stat {
  double mean = 0, stddev = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;
  size_t count = 0;
};
Stat summarize(const std::vector<double>& v);  // stddev: numpy.std (population)

// One request as measured by the client (seconds from the level's start).
struct Record {
  double scheduled = 0;            // when the schedule wanted it sent
  double sent = 0;                 // when it was sent
  double first_token = -1;         // first content chunk (< 0: none)
  double done = -1;                // last byte (< 0: never finished)
  std::vector<double> chunk_times; // arrival of each content chunk
  int64_t input_tokens = 0;        // the server's usage.prompt_tokens, else what the client sent
  int64_t output_tokens = 0;       // the server's usage.completion_tokens, else the content chunks
  int64_t expected_output = 0;     // max_tokens asked
  std::string error;               // empty: success
  std::string text;                // the generated text
  std::string request;             // the JSON body sent
};

struct Slo {
  std::optional<double> ttft_ms, itl_ms, e2e_ms;
};
Result<Slo> parse_goodput(const std::vector<std::string>& specs);

// The figures of one level, from its records.
struct Summary {
  double duration_s = 0;           // first send to last completion
  size_t completed = 0, failed = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Stat ttft_ms, itl_ms, tpot_ms, e2e_ms;
  std::optional<double> goodput;   // good requests/s, with an SLO
  size_t good = 0;
};
// ttft: first_token - sent; itl: gaps between consecutive content chunks of every request;
// tpot: (done - first_token) / (output_tokens - 1) per request with output_tokens > 1;
// e2e: done - sent. Failed requests count only in `failed`.
Summary summarize_level(const std::vector<Record>& records, const Slo& slo);

}  // namespace gpuopt::cli::llmperf
