// The --bench sweep. Prompts are random ids (seeded), sampling is greedy with EOS ignored: what is
// measured is the runner, not where a random model happens to stop.
#include "llm/generate_bench.h"

#include <fmt/format.h>

#include <random>

#include "core/table.h"

namespace gpuopt::llm {
namespace {

std::vector<GenerateRequest> requests_for(const LlmConfig& c, int64_t prompt_len, int64_t gen_len, int64_t batch,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<GenerateRequest> reqs(static_cast<size_t>(batch));
  for (GenerateRequest& r : reqs) {
    for (int64_t i = 0; i < prompt_len; ++i)
      r.prompt.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(c.vocab_size)));
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_new_tokens = gen_len;
  }
  return reqs;
}

}  // namespace

int64_t bench_blocks_needed(const LlmConfig& cfg, const BenchSweep& sw, int block_size) {
  int64_t most = 0;
  for (int64_t p : sw.prompt_lens)
    for (int64_t g : sw.gen_lens)
      for (int64_t b : sw.batches) {
        if (p > cfg.max_position) continue;
        std::vector<GenerateRequest> reqs(static_cast<size_t>(b));
        for (GenerateRequest& r : reqs) {
          r.prompt.assign(static_cast<size_t>(p), 0);
          r.params.max_new_tokens = g;
        }
        most = std::max(most, blocks_needed(cfg, reqs, block_size));
      }
  return most;
}

Result<std::vector<BenchRow>> run_bench(ModelRunner& runner, const BenchSweep& sw, double bandwidth_gbs) {
  const LlmConfig& c = runner.config();
  GenerateOptions go;
  go.max_step_tokens = sw.max_step_tokens;
  go.bandwidth_gbs = bandwidth_gbs;
  // Warm-up: first-touch of weights and caches, CUDA graph capture, the thread pool's start.
  {
    auto warm = requests_for(c, std::min<int64_t>(8, c.max_position), 4, 1, sw.seed);
    GPUOPT_RETURN_IF_ERROR(generate(runner, warm, go).status());
  }
  std::vector<BenchRow> rows;
  for (int64_t p : sw.prompt_lens)
    for (int64_t g : sw.gen_lens)
      for (int64_t b : sw.batches) {
        BenchRow row;
        row.prompt_len = p;
        row.gen_len = g;
        row.batch = b;
        auto reqs = requests_for(c, p, g, b, sw.seed);
        if (p > c.max_position) {
          row.skipped = true;
          row.why = fmt::format("prompt longer than the context ({})", c.max_position);
        } else if (blocks_needed(c, reqs, runner.block_size()) > runner.num_kv_blocks()) {
          row.skipped = true;
          row.why = fmt::format("needs more KV blocks than the {} the runner holds", runner.num_kv_blocks());
        } else {
          GPUOPT_ASSIGN_OR_RETURN(GenerateResult r, generate(runner, reqs, go));
          row.ttft_ms = r.ttft_ms;
          row.prefill_tok_s = r.prefill_ms > 0 ? static_cast<double>(r.prompt_tokens) / (r.prefill_ms * 1e-3) : 0;
          row.decode_tok_s = r.tok_s;
          row.itl_p50_ms = r.itl_p50_ms;
          row.itl_p99_ms = r.itl_p99_ms;
          row.roofline_frac = r.roofline_frac;
        }
        rows.push_back(row);
      }
  return rows;
}

std::string bench_table(const std::vector<BenchRow>& rows) {
  Table t(
      {"prompt", "gen", "batch", "TTFT ms", "prefill tok/s", "decode tok/s", "ITL p50 ms", "ITL p99 ms", "roofline"});
  std::string notes;
  for (const BenchRow& r : rows) {
    std::vector<std::string> row = {std::to_string(r.prompt_len), std::to_string(r.gen_len), std::to_string(r.batch)};
    if (r.skipped) {
      row.push_back("skipped");
      notes += fmt::format("skipped {} x {} x {}: {}\n", r.prompt_len, r.gen_len, r.batch, r.why);
    } else {
      row.insert(row.end(), {fmt::format("{:.2f}", r.ttft_ms), fmt::format("{:.1f}", r.prefill_tok_s),
                             fmt::format("{:.1f}", r.decode_tok_s), fmt::format("{:.3f}", r.itl_p50_ms),
                             fmt::format("{:.3f}", r.itl_p99_ms),
                             r.roofline_frac < 0 ? std::string("n/a") : fmt::format("{:.0f}%", 100 * r.roofline_frac)});
    }
    t.add(row);
  }
  return t.render() + notes;
}

nlohmann::json bench_json(const std::vector<BenchRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    nlohmann::json j = {{"prompt_len", r.prompt_len}, {"gen_len", r.gen_len}, {"batch", r.batch}};
    if (r.skipped) {
      j["skipped"] = r.why;
    } else {
      j["ttft_ms"] = r.ttft_ms;
      j["prefill_tok_s"] = r.prefill_tok_s;
      j["tok_s"] = r.decode_tok_s;
      j["itl_p50_ms"] = r.itl_p50_ms;
      j["itl_p99_ms"] = r.itl_p99_ms;
      j["roofline_frac"] = r.roofline_frac < 0 ? nlohmann::json() : nlohmann::json(r.roofline_frac);
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace gpuopt::llm
