// llm_bench: drives the CUDA runner over a grid of (batch, prompt length, new tokens) with greedy
// decoding on random prompt ids and prints one JSON object: start-up (checkpoint open + weights on
// the GPU + KV cache), and per run TTFT, inter-token latency p50/p99, decode and end-to-end
// tokens/s. Optionally writes the f32 logits of the first generated position of a given prompt
// (for the accuracy comparison in scripts/gpu/llm.py).
//
//   llm_bench --model DIR --dtype f16 --runs 1x128x128,64x2048x1024 --logits-prompt 1,2,3
//             --logits-out first.f32 > bench.json
//   llm_bench --model GPTQ_DIR --quant-kernels --runs 1x128x128   # packed W4A16 / W8A16 / FP8
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/cuda/make_cuda_runner.h"
#include "llm/kv_cache.h"
#include "llm/runner.h"

using namespace gpuopt;
using namespace gpuopt::llm;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Run {
  int batch = 1;
  int prompt = 128;
  int new_tokens = 128;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

class Bench {
 public:
  Bench(ModelRunner& r, int max_step_tokens)
      : r_(r), alloc_(static_cast<int32_t>(r.num_kv_blocks())), max_step_(max_step_tokens) {
    greedy_.temperature = 0;
  }

  // Decode steps at every block-table width bucket the run will reach, and one prefill chunk of
  // its shape: graphs captured and GEMM algorithms chosen before anything is timed. The cache
  // slots these write are overwritten by the timed run before they are read.
  Status warm(const Run& run) {
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(run.batch));
    const int64_t len = run.prompt + run.new_tokens;
    for (auto& t : tables)
      if (!alloc_.grow(t, len, r_.block_size())) return Status::OutOfMemory("KV cache too small for the warm-up");
    std::vector<SampledToken> out;
    for (int64_t w = 16;; w *= 2) {
      const int64_t pos = std::min<int64_t>(w * r_.block_size(), len) - 1;
      StepBatch b;
      for (auto& t : tables) b.seqs.push_back({1, pos, &t, true});
      b.tokens.assign(tables.size(), 1);
      GPUOPT_RETURN_IF_ERROR(sample(b, &out));
      if (pos == len - 1) break;
    }
    StepBatch b;
    int64_t used = 0;
    for (auto& t : tables) {
      const int n = static_cast<int>(std::min<int64_t>(run.prompt, max_step_ - used));
      if (n <= 0) break;
      b.seqs.push_back({n, 0, &t, true});
      used += n;
    }
    b.tokens.assign(static_cast<size_t>(used), 1);
    GPUOPT_RETURN_IF_ERROR(sample(b, &out));
    for (auto& t : tables) alloc_.release(t);
    return Status::Ok();
  }

  Result<nlohmann::json> time(const Run& run, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const int64_t V = r_.config().vocab_size;
    std::vector<std::vector<int32_t>> toks(static_cast<size_t>(run.batch)), tables(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      for (int j = 0; j < run.prompt; ++j) toks[i].push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(V)));
      if (!alloc_.grow(tables[i], run.prompt + run.new_tokens, r_.block_size()))
        return Status::OutOfMemory("KV cache too small for batch {} x {} tokens", run.batch,
                                   run.prompt + run.new_tokens);
    }
    std::vector<SampledToken> out;
    const auto t0 = Clock::now();
    // Prefill: whole prompts packed into steps of at most max_step tokens, long ones chunked.
    std::vector<int64_t> done(toks.size(), 0);
    size_t next = 0;
    while (next < toks.size()) {
      StepBatch b;
      std::vector<size_t> owners;
      int64_t room = max_step_;
      for (size_t i = next; i < toks.size() && room > 0; ++i) {
        const int n = static_cast<int>(std::min<int64_t>(run.prompt - done[i], room));
        const bool last = done[i] + n == run.prompt;
        b.seqs.push_back({n, done[i], &tables[i], last});
        b.tokens.insert(b.tokens.end(), toks[i].begin() + done[i], toks[i].begin() + done[i] + n);
        if (last) owners.push_back(i);
        done[i] += n;
        room -= n;
        if (!last) break;
      }
      GPUOPT_RETURN_IF_ERROR(sample(b, &out));
      for (size_t k = 0; k < owners.size(); ++k) toks[owners[k]].push_back(static_cast<int32_t>(out[k].token));
      while (next < toks.size() && done[next] == run.prompt) ++next;
    }
    const double ttft = ms_since(t0);
    std::vector<double> itl;
    for (int s = 1; s < run.new_tokens; ++s) {
      StepBatch b;
      for (size_t i = 0; i < toks.size(); ++i) {
        b.seqs.push_back({1, static_cast<int64_t>(toks[i].size()) - 1, &tables[i], true});
        b.tokens.push_back(toks[i].back());
      }
      const auto ts = Clock::now();
      GPUOPT_RETURN_IF_ERROR(sample(b, &out));
      itl.push_back(ms_since(ts));
      for (size_t i = 0; i < toks.size(); ++i) toks[i].push_back(static_cast<int32_t>(out[i].token));
    }
    const double total = ms_since(t0);
    for (auto& t : tables) alloc_.release(t);
    double sum = 0;
    for (double v : itl) sum += v;
    const double mean = itl.empty() ? 0 : sum / static_cast<double>(itl.size());
    nlohmann::json j;
    j["batch"] = run.batch;
    j["prompt"] = run.prompt;
    j["new_tokens"] = run.new_tokens;
    j["ttft_ms"] = ttft;
    j["itl_mean_ms"] = mean;
    j["itl_p50_ms"] = percentile(itl, 0.5);
    j["itl_p99_ms"] = percentile(itl, 0.99);
    j["decode_tok_s"] = mean > 0 ? run.batch * 1000.0 / mean : 0;
    j["tok_s"] = run.batch * run.new_tokens * 1000.0 / total;
    j["total_ms"] = total;
    // The roofline's bytes at the mean context of the decode steps.
    j["decode_bytes"] = r_.decode_bytes(run.batch, run.prompt + run.new_tokens / 2);
    j["first_tokens"] =
        std::vector<int32_t>(toks[0].begin() + run.prompt,
                             toks[0].begin() + std::min<int>(run.prompt + 16, static_cast<int>(toks[0].size())));
    return j;
  }

 private:
  Status sample(const StepBatch& b, std::vector<SampledToken>* out) {
    size_t n = 0;
    for (const auto& s : b.seqs) n += s.sample ? 1 : 0;
    std::vector<const SamplingParams*> params(n, &greedy_);
    std::vector<uint64_t> seeds(n, 0);
    std::vector<const std::vector<int64_t>*> hist(n, &empty_);
    std::vector<int64_t> steps(n, 0);
    return r_.step_sample(b, params, seeds, hist, hist, steps, out);
  }

  ModelRunner& r_;
  BlockAllocator alloc_;
  int max_step_;
  SamplingParams greedy_;
  std::vector<int64_t> empty_;
};

std::vector<Run> parse_runs(const std::string& s) {
  std::vector<Run> runs;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Run r;
    if (std::sscanf(item.c_str(), "%dx%dx%d", &r.batch, &r.prompt, &r.new_tokens) == 3) runs.push_back(r);
  }
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  const auto t_start = Clock::now();
  CLI::App app{"time the CUDA LLM runner"};
  std::string model, dtype = "f16", runs_s = "1x128x128", logits_prompt, logits_out, kv_dtype = "auto";
  int max_step = 8192, max_batch = 256;
  int64_t kv_blocks = 0;
  bool graphs = true, quant_kernels = false;
  app.add_option("--model", model, "Hugging Face model folder")->required();
  app.add_option("--dtype", dtype, "f16, bf16 or f32");
  app.add_option("--runs", runs_s, "BATCHxPROMPTxNEW,...");
  app.add_option("--max-step-tokens", max_step);
  app.add_option("--max-batch", max_batch);
  app.add_flag("!--no-graphs", graphs);
  app.add_flag("--quant-kernels", quant_kernels, "GPTQ/AWQ/FP8 folders: the packed kernels (RunnerOptions)");
  app.add_option("--kv-cache-dtype", kv_dtype, "auto, fp16 or fp8 (kv_cache.h)");
  app.add_option("--num-kv-blocks", kv_blocks, "KV cache blocks (0: from free memory)");
  app.add_option("--logits-prompt", logits_prompt, "comma-separated ids: write the next-token logits");
  app.add_option("--logits-out", logits_out);
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const Status& s) {
    std::fprintf(stderr, "llm_bench: %s\n", s.to_string().c_str());
    return 1;
  };
  auto cfg = load_llm_config(model);
  if (!cfg.ok()) return fail(cfg.status());
  auto ckpt = open_checkpoint(model, *cfg);
  if (!ckpt.ok()) return fail(ckpt.status());
  RunnerOptions o;
  auto dt = dtype_from_name(dtype);
  if (!dt) return fail(Status::InvalidArgument("--dtype {}", dtype));
  o.compute_dtype = *dt;
  o.max_step_tokens = max_step;
  o.max_batch = max_batch;
  o.cuda_graphs = graphs;
  o.quant_kernels = quant_kernels;
  o.num_kv_blocks = kv_blocks;
  auto kv = parse_kv_cache_dtype(kv_dtype);
  if (!kv.ok()) return fail(kv.status());
  o.kv_cache_dtype = *kv;
  auto runner = make_cuda_runner(*cfg, **ckpt, o, {});
  if (!runner.ok()) return fail(runner.status());
  ModelRunner& r = **runner;
  nlohmann::json j;
  j["start_s"] = ms_since(t_start) / 1000.0;
  j["weights_bytes"] = r.decode_bytes(0, 0);
  j["kv_blocks"] = r.num_kv_blocks();
  j["kv_tokens"] = r.num_kv_blocks() * r.block_size();
  std::fprintf(stderr, "llm_bench: ready in %.2f s, KV cache %lld tokens\n", ms_since(t_start) / 1000.0,
               static_cast<long long>(r.num_kv_blocks() * r.block_size()));
  std::fprintf(stderr, "llm_bench: weights %s\n", j.dump().c_str());

  if (!logits_prompt.empty()) {
    StepBatch b;
    std::stringstream ss(logits_prompt);
    std::string id;
    while (std::getline(ss, id, ',')) b.tokens.push_back(std::stoi(id));
    std::vector<int32_t> table;
    BlockAllocator alloc(static_cast<int32_t>(r.num_kv_blocks()));
    alloc.grow(table, static_cast<int64_t>(b.tokens.size()), r.block_size());
    b.seqs.push_back({static_cast<int32_t>(b.tokens.size()), 0, &table, true});
    std::vector<float> logits;
    if (Status s = r.step(b, &logits); !s.ok()) return fail(s);
    std::ofstream(logits_out, std::ios::binary)
        .write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
  }
  Bench bench(r, max_step);
  nlohmann::json runs = nlohmann::json::array();
  uint64_t seed = 1;
  for (const Run& run : parse_runs(runs_s)) {
    if (Status s = bench.warm(run); !s.ok()) return fail(s);
    auto res = bench.time(run, seed++);
    if (!res.ok()) return fail(res.status());
    std::fprintf(stderr, "llm_bench: %s\n", res->dump().c_str());
    runs.push_back(*res);
  }
  j["runs"] = runs;
  std::printf("%s\n", j.dump(1).c_str());
  return 0;
}
