// `gpuopt generate --bench`: a sweep of prompt length x output length x batch over one runner,
// printed as llama-bench prints its table (one row per point) or as JSON.
//
//   BenchSweep sw{.prompt_lens = {128, 512}, .gen_lens = {128}, .batches = {1, 8}};
//   GPUOPT_ASSIGN_OR_RETURN(auto rows, run_bench(*runner, sw, bandwidth_gbs));
//   fmt::print("{}", bench_table(rows, bandwidth_gbs));
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/generate.h"

namespace gpuopt::llm {

struct BenchSweep {
  std::vector<int64_t> prompt_lens = {128, 512};
  std::vector<int64_t> gen_lens = {128};
  std::vector<int64_t> batches = {1};
  uint64_t seed = 0;  // the random prompts' ids
  int max_step_tokens = 512;
};

struct BenchRow {
  int64_t prompt_len = 0, gen_len = 0, batch = 0;
  bool skipped = false;  // longer than the context, or more KV than the runner holds
  std::string why;
  double ttft_ms = 0, prefill_tok_s = 0, decode_tok_s = 0, itl_p50_ms = 0, itl_p99_ms = 0;
  double roofline_frac = -1;
};

// Largest KV block count any point of the sweep needs (what a CPU runner is sized to).
int64_t bench_blocks_needed(const LlmConfig& cfg, const BenchSweep& sw, int block_size);
// Runs each point once after a short warm-up (greedy, EOS ignored, so every point generates its
// full length); points that cannot run are kept as skipped rows saying why.
Result<std::vector<BenchRow>> run_bench(ModelRunner& runner, const BenchSweep& sw, double bandwidth_gbs);
std::string bench_table(const std::vector<BenchRow>& rows);
nlohmann::json bench_json(const std::vector<BenchRow>& rows);

}  // namespace gpuopt::llm
