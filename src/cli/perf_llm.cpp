// gpuopt perf (OpenAI mode): the load loop, progress, the table and --json (perf_llm.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "cli/command.h"
#include "cli/perf_llm_http.h"
#include "cli/perf_llm_internal.h"
#include "core/table.h"

namespace gpuopt::cli::llmperf {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Target {
  std::string host;
  uint16_t port = 8000;
  std::string path;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sends one prompt and reads its stream into `r` (times relative to t0).
void send_one(const Options& o, const Target& tgt, StreamClient& client, const Prompt& p, Clock::time_point t0,
              Record& r) {
  r.expected_output = p.max_tokens;
  r.input_tokens = p.input_tokens;
  r.request = request_body(o, p);
  const std::string& body = r.request;
  SseParser sse;
  std::string raw;  // a non-200 answer's body, for the error
  bool done = false;
  int64_t chunks = 0;
  std::optional<int64_t> usage_in, usage_out;
  int status = 0;
  r.sent = seconds_since(t0);
  auto res = client.post(tgt.path, body, [&](std::string_view bytes) {
    const double now = seconds_since(t0);
    if (status == 0 && raw.size() < 4096) raw.append(bytes.substr(0, 4096 - raw.size()));
    sse.feed(bytes, [&](std::string_view data) {
      if (data == "[DONE]") {
        done = true;
        return;
      }
      json j = json::parse(data, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (r.error.empty()) r.error = fmt::format("an event that is not a JSON object: {:.200}", data);
        return;
      }
      if (j.contains("error")) {
        if (r.error.empty()) r.error = fmt::format("error event: {:.300}", j["error"].dump());
        return;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const auto& u = j["usage"];
        if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) usage_in = u["prompt_tokens"].get<int64_t>();
        if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
          usage_out = u["completion_tokens"].get<int64_t>();
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
      const json& c = j["choices"][0];
      const json* piece = nullptr;
      if (c.contains("text")) piece = &c["text"];
      else if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content")) piece = &c["delta"]["content"];
      if (!piece || !piece->is_string() || piece->get_ref<const std::string&>().empty()) return;
      if (r.first_token < 0) r.first_token = now;
      r.chunk_times.push_back(now);
      r.text += piece->get_ref<const std::string&>();
      ++chunks;
    });
  });
  r.done = seconds_since(t0);
  if (!res.ok()) {
    r.error = res.status().message();
    return;
  }
  status = *res;
  if (status != 200) {
    r.error = fmt::format("HTTP {}: {:.300}", status, raw);
    return;
  }
  if (r.error.empty() && !done) r.error = "the stream ended without data: [DONE]";
  if (usage_in) r.input_tokens = *usage_in;
  r.output_tokens = usage_out ? *usage_out : chunks;
}

struct LevelRun {
  std::string mode;  // "concurrency" or "request_rate"
  double value = 0;
  std::vector<Record> records;
};

// Runs prompts [first, first + n) at one level: `workers` threads take requests in order, each
// waiting for its scheduled time (all 0 in closed loop).
std::vector<Record> run_requests(const Options& o, const Target& tgt, const std::vector<Prompt>& prompts, size_t first,
                                 size_t n, int64_t workers, const std::vector<double>& schedule, const std::string& label) {
  std::vector<Record> recs(n);
  std::atomic<size_t> next{0}, finished{0}, failed{0};
  std::atomic<int64_t> out_tokens{0};
  const auto t0 = Clock::now();
  // Connections are pooled, not one per worker: an open loop has many workers waiting for their
  // arrival times, and a connection each would hold more idle keep-alive connections than requests
  // in flight (past a server's per-client cap: gpuopt serve's --http-max-connections-per-client).
  std::mutex pool_mu;
  std::vector<std::unique_ptr<StreamClient>> pool;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      recs[i].scheduled = schedule.empty() ? 0 : schedule[i];
      if (!schedule.empty()) std::this_thread::sleep_until(t0 + std::chrono::duration<double>(schedule[i]));
      std::unique_ptr<StreamClient> client;
      {
        std::lock_guard lock(pool_mu);
        if (!pool.empty()) {
          client = std::move(pool.back());
          pool.pop_back();
        }
      }
      try {  // out of descriptors, Asio throws from a new io_context: that request fails, not perf
        if (!client) client = std::make_unique<StreamClient>(tgt.host, tgt.port, timeout);
        send_one(o, tgt, *client, prompts[first + i], t0, recs[i]);
      } catch (const std::exception& e) {
        recs[i].error = fmt::format("client: {}", e.what());
        client.reset();
      }
      if (client) {
        std::lock_guard lock(pool_mu);
        pool.push_back(std::move(client));
      }
      out_tokens += recs[i].output_tokens;
      failed += !recs[i].error.empty();
      ++finished;
    }
  };
  std::vector<std::thread> threads;
  const int64_t k = std::min<int64_t>(workers, static_cast<int64_t>(n));
  for (int64_t i = 0; i < k; ++i) threads.emplace_back(work);
  // Progress every 2 s on stderr while the level runs.
  std::mutex mu;
  std::condition_variable cv;
  bool over = false;
  std::thread progress([&] {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return over; })) {
      if (o.quiet) continue;
      const double t = seconds_since(t0);
      fmt::print(stderr, "perf: {}: {}/{} requests done, {} failed, {:.1f} output tok/s, {:.0f} s\n", label,
                 finished.load(), n, failed.load(), t > 0 ? static_cast<double>(out_tokens.load()) / t : 0.0, t);
    }
  });
  for (auto& t : threads) t.join();
  {
    std::lock_guard lock(mu);
    over = true;
  }
  cv.notify_all();
  progress.join();
  return recs;
}

json stat_json(const Stat& s) {
  return {{"mean", s.mean}, {"stddev", s.stddev}, {"min", s.min}, {"max", s.max},
          {"p50", s.p50},   {"p90", s.p90},       {"p99", s.p99}, {"count", s.count}};
}

Result<Target> parse_target(const Options& o) {
  Target t;
  std::string url = o.url.empty() ? "127.0.0.1:8000" : o.url;
  if (url.rfind("http://", 0) == 0) url = url.substr(7);
  if (url.rfind("https://", 0) == 0) return Status::InvalidArgument("--url '{}': https is not supported", o.url);
  if (auto slash = url.find('/'); slash != std::string::npos) url = url.substr(0, slash);
  auto colon = url.rfind(':');
  t.host = url.substr(0, colon);
  if (colon != std::string::npos) {
    const int port = std::atoi(url.c_str() + colon + 1);
    if (port < 1 || port > 65535 || url.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      return Status::InvalidArgument("--url '{}': expected host:port with a port in 1..65535", o.url);
    t.port = static_cast<uint16_t>(port);
  }
  if (t.host.empty()) return Status::InvalidArgument("--url '{}': no host", o.url);
  t.path = !o.endpoint.empty() ? o.endpoint : o.endpoint_type == "chat" ? "/v1/chat/completions" : "/v1/completions";
  return t;
}

}  // namespace

void add_options(CLI::App* cmd, const std::shared_ptr<Options>& o) {
  const std::string g = "OpenAI mode (--service-kind openai)";
  cmd->add_option("--endpoint-type", o->endpoint_type, "chat (/v1/chat/completions) or completions (/v1/completions); implies --service-kind openai")
      ->check(one_of({"chat", "completions"}))->group(g);
  cmd->add_option("--endpoint", o->endpoint, "Request path instead of the endpoint type's")->group(g);
  cmd->add_option("--concurrency", o->concurrency, "Requests in flight: one level per value (1,64,256)")
      ->delimiter(',')->check(int_range(1, 100000))->group(g);
  cmd->add_option("--request-rate", o->request_rate, "Poisson arrivals, requests/s: one level per value")
      ->delimiter(',')->check(real_range(1e-6, 1e9))->group(g);
  cmd->add_option("--max-concurrency", o->max_concurrency, "With --request-rate: requests in flight at most")
      ->check(int_range(1, 100000))->group(g);
  cmd->add_option("--num-prompts,--request-count", o->num_prompts, "Requests per level")
      ->check(int_range(1, 10000000))->capture_default_str()->group(g);
  cmd->add_option("--warmup-request-count", o->warmup, "Requests before each level, not measured")
      ->check(int_range(0, 1000000))->capture_default_str()->group(g);
  cmd->add_option("--synthetic-input-tokens-mean", o->input_mean, "Prompt length, tokens")
      ->check(int_range(1, 10000000))->capture_default_str()->group(g);
  cmd->add_option("--synthetic-input-tokens-stddev", o->input_stddev, "Prompt length spread (normal)")
      ->check(int_range(0, 10000000))->capture_default_str()->group(g);
  cmd->add_option("--output-tokens-mean", o->output_mean, "max_tokens of each request")
      ->check(int_range(1, 10000000))->capture_default_str()->group(g);
  cmd->add_option("--output-tokens-stddev", o->output_stddev, "max_tokens spread (normal)")
      ->check(int_range(0, 10000000))->capture_default_str()->group(g);
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json (or its folder): synthetic prompts as text of exact token counts")->group(g);
  cmd->add_option("--vocab-size", o->vocab_size, "Without --tokenizer: token-id prompts draw ids below this")
      ->check(int_range(1, 100000000))->capture_default_str()->group(g);
  cmd->add_option("--input-file", o->input_file,
                  "JSONL prompts: {\"text\": ...} or {\"prompt\": text or ids} or {\"messages\": [...]}, optional \"max_tokens\"")
      ->group(g);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Ask the server to generate max_tokens tokens (ignore_eos: true)")->group(g);
  cmd->add_option("--seed", o->seed, "Seed of the prompts, lengths and arrivals (numpy RandomState's: below 2^32)")
      ->check(int_range(0, 4294967295LL))->capture_default_str()->group(g);
  cmd->add_option("--goodput", o->goodput, "SLO for goodput: ttft:MS itl:MS e2e:MS (itl: a request's mean inter-token latency)")
      ->group(g);
  cmd->add_option("--request-timeout", o->timeout_s, "Seconds a request may wait for its next bytes")
      ->check(real_range(0.001, 86400))->capture_default_str()->group(g);
  cmd->add_option("--export-requests", o->export_requests, "Write every request's timings as JSONL")->group(g);
  cmd->add_flag("--quiet", o->quiet, "No progress lines")->group(g);
}

int run(const Options& o) {
  auto tgt = parse_target(o);
  if (!tgt.ok()) return report_error(tgt.status(), true);
  auto slo = parse_goodput(o.goodput);
  if (!slo.ok()) return report_error(slo.status(), true);
  if (!o.concurrency.empty() && !o.request_rate.empty())
    return report_error(Status::InvalidArgument("--concurrency and --request-rate exclude each other"), true);
  if (o.max_concurrency > 0 && o.request_rate.empty())
    return report_error(Status::InvalidArgument("--max-concurrency goes with --request-rate"), true);
  // A load generator holds a socket (and an event descriptor) per request in flight: the soft
  // descriptor limit goes up to the hard one, as load generators (wrk, Go's runtime) do.
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  std::ofstream exp;
  if (!o.export_requests.empty()) {
    exp.open(o.export_requests);
    if (!exp) return report_error(Status::NotFound("--export-requests '{}': cannot be written", o.export_requests));
  }
  NumpyRandom rng(static_cast<uint32_t>(o.seed));
  auto prompts = make_prompts(o, rng);
  if (!prompts.ok()) return report_error(prompts.status(), prompts.status().code() == StatusCode::kInvalidArgument);
  std::vector<LevelRun> levels;
  const bool rate = !o.request_rate.empty();
  std::vector<double> values;
  if (rate) values = o.request_rate;
  else for (int64_t c : o.concurrency.empty() ? std::vector<int64_t>{1} : o.concurrency) values.push_back(static_cast<double>(c));
  const size_t n = static_cast<size_t>(o.num_prompts), warm = static_cast<size_t>(o.warmup);
  for (double v : values) {
    LevelRun lv{rate ? "request_rate" : "concurrency", v, {}};
    const std::string label = rate ? fmt::format("request rate {}/s", v) : fmt::format("concurrency {}", v);
    const int64_t workers = rate ? (o.max_concurrency > 0 ? o.max_concurrency : std::min<int64_t>(o.num_prompts, 4096))
                                 : static_cast<int64_t>(v);
    if (warm > 0 && !rate) {
      // Closed loop: the warm-up requests are the first of one continuous run, so the measured ones
      // meet the server in its steady state (requests arriving as others finish), not the burst of
      // `concurrency` simultaneous prompts a separate start would make.
      std::vector<Record> all = run_requests(o, *tgt, *prompts, 0, warm + n, workers, {}, label);
      lv.records.assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(warm)),
                        std::make_move_iterator(all.end()));
      levels.push_back(std::move(lv));
      continue;
    }
    if (warm > 0) run_requests(o, *tgt, *prompts, 0, warm, std::min<int64_t>(workers, o.warmup), {}, label + " warm-up");
    // The schedule draws after the prompts, one per level, from the same generator.
    std::vector<double> schedule = rate ? poisson_schedule(rng, o.num_prompts, v) : std::vector<double>{};
    lv.records = run_requests(o, *tgt, *prompts, warm, n, workers, schedule, label);
    levels.push_back(std::move(lv));
  }
  json out = {{"model", o.model}, {"url", fmt::format("{}:{}", tgt->host, tgt->port)}, {"endpoint", tgt->path},
              {"levels", json::array()}};
  Table t({rate ? "rate/s" : "concurrency", "ok", "failed", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
           "ITL p50 ms", "ITL p99 ms", "e2e p50 ms", "e2e p99 ms", "goodput req/s"},
          fmt::format("gpuopt perf: model '{}', {} at {}:{}", o.model, tgt->path, tgt->host, tgt->port));
  bool any_ok = false;
  std::string first_error;
  std::vector<std::string> failures;  // printed when something succeeded (else the one error line says it)
  for (const auto& lv : levels) {
    Summary s = summarize_level(lv.records, *slo);
    any_ok = any_ok || s.completed > 0;
    std::string err;
    for (const auto& r : lv.records)
      if (!r.error.empty()) {
        err = r.error;
        break;
      }
    if (first_error.empty()) first_error = err;
    if (s.failed > 0)
      failures.push_back(fmt::format("perf: {} {}: {} of {} requests failed; the first: {}\n", lv.mode, lv.value,
                                     s.failed, lv.records.size(), err));
    json j = {{lv.mode, lv.value}, {"num_prompts", lv.records.size()}, {"completed", s.completed},
              {"failed", s.failed}, {"first_error", err}, {"duration_s", s.duration_s},
              {"input_tokens", s.input_tokens}, {"output_tokens", s.output_tokens},
              {"request_throughput", s.request_throughput}, {"output_throughput", s.output_throughput},
              {"total_token_throughput", s.total_token_throughput}, {"ttft_ms", stat_json(s.ttft_ms)},
              {"itl_ms", stat_json(s.itl_ms)}, {"tpot_ms", stat_json(s.tpot_ms)}, {"e2e_ms", stat_json(s.e2e_ms)},
              {"goodput", s.goodput ? json(*s.goodput) : json()}, {"good_requests", s.good}};
    out["levels"].push_back(j);
    t.add({fmt::format("{}", lv.value), fmt::format("{}", s.completed), fmt::format("{}", s.failed),
           fmt::format("{:.2f}", s.request_throughput), fmt::format("{:.1f}", s.output_throughput),
           fmt::format("{:.1f}", s.ttft_ms.p50), fmt::format("{:.1f}", s.ttft_ms.p99), fmt::format("{:.2f}", s.itl_ms.p50),
           fmt::format("{:.2f}", s.itl_ms.p99), fmt::format("{:.1f}", s.e2e_ms.p50), fmt::format("{:.1f}", s.e2e_ms.p99),
           s.goodput ? fmt::format("{:.2f}", *s.goodput) : "-"});
    if (exp) {
      for (size_t i = 0; i < lv.records.size(); ++i) {
        const Record& r = lv.records[i];
        exp << json{{lv.mode, lv.value},         {"index", i},
                    {"scheduled", r.scheduled},  {"sent", r.sent},
                    {"first_token", r.first_token}, {"done", r.done},
                    {"chunk_times", r.chunk_times}, {"input_tokens", r.input_tokens},
                    {"output_tokens", r.output_tokens}, {"max_tokens", r.expected_output},
                    {"error", r.error},          {"text", r.text},
                    {"request", json::parse(r.request, nullptr, false)}}
                   .dump()
            << "\n";
      }
    }
  }
  if (!any_ok) return report_error(Status::Unavailable("no request succeeded; the first error: {}", first_error));
  for (const auto& f : failures) fmt::print(stderr, "{}", f);
  if (o.json)
    fmt::print("{}\n", out.dump(2));
  else
    fmt::print("{}", t.render());
  return kExitOk;
}

}  // namespace gpuopt::cli::llmperf
