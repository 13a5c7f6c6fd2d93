// `gpuopt generate MODEL_DIR`: text generation with a Hugging Face Llama / Mistral / Qwen2 folder
// (config.json, safetensors, tokenizer.json) on the CPU runner (fp32) or the CUDA runner; text
// streams to stdout, timing to stderr (or everything as --json); --bench sweeps sizes.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "bench/report.h"
#include "cli/command.h"
#include "cli/llm_runner_option.h"
#include "core/npy.h"
#include "llm/checkpoint.h"
#include "llm/generate.h"
#include "llm/generate_bench.h"
#include "llm/kv_cache.h"
#include "llm/tokenizer.h"
#include "monitor/cuda_props.h"
#include "monitor/spec_table.h"

namespace gpuopt::cli {
namespace {

using namespace gpuopt::llm;
namespace fs = std::filesystem;

struct Options {
  std::string model_dir;
  std::string prompt, prompt_ids, prompts_file;
  int64_t batch = 1;
  SamplingParams sp;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_ids;
  LlmRunnerFlags runner;
  int max_step_tokens = 512;
  bool random_weights = false;
  bool json = false;
  bool bench = false;
  std::vector<int64_t> bench_prompt = {128, 512}, bench_gen = {128}, bench_batch = {1};
  std::string dump_logits;
  double bandwidth_gbs = 0;
};

Result<std::vector<int64_t>> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    const std::string tok = text.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0' || errno != 0 || v < 0)
      return Status::InvalidArgument("{}: '{}' is not a comma-separated list of token ids", what, text);
    ids.push_back(v);
    i = j + 1;
  }
  return ids;
}

// --prompts FILE: one prompt per line; a line that is a JSON list of integers is token ids, any
// other non-empty line is text.
Result<std::vector<std::pair<std::string, std::vector<int64_t>>>> read_prompts(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("--prompts: '{}' cannot be read", path);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.front() == '[') {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_array() &&
          std::all_of(j.begin(), j.end(), [](const nlohmann::json& e) { return e.is_number_unsigned(); })) {
        out.push_back({"", j.get<std::vector<int64_t>>()});
        continue;
      }
    }
    out.push_back({line, {}});
  }
  if (out.empty()) return Status::InvalidArgument("--prompts: '{}' holds no prompt", path);
  return out;
}

// Bandwidth for the roofline share: --bandwidth-gbs, else the H200's measured copy bandwidth
// (bench/report.h anchors) or the device's theoretical figure; 0 (n/a) on the CPU.
double device_bandwidth_gbs(const Options& o) {
  if (o.bandwidth_gbs > 0) return o.bandwidth_gbs;
  if (!o.runner.device.is_cuda()) return 0;
  auto p = cuda_device_props(o.runner.device.index);
  if (!p.ok()) return 0;
  if (p->name.find("H200") != std::string::npos)
    for (const auto& a : bench::h200_anchors())
      if (std::string(a.figure) == "D2D copy") return a.value;
  const DeviceSpec s = spec_for(GpuProps{.cc_major = p->cc_major,
                                         .cc_minor = p->cc_minor,
                                         .sm_count = p->sm_count,
                                         .sm_clock_mhz = p->sm_clock_khz / 1e3,
                                         .mem_clock_mhz = p->mem_clock_khz / 1e3,
                                         .mem_bus_width_bits = p->mem_bus_width_bits});
  return s.mem_bandwidth_bytes_per_s ? *s.mem_bandwidth_bytes_per_s / 1e9 : 0;
}

nlohmann::json seq_json(const GenerateRequest& req, const SequenceResult& s, bool with_text, int logprobs) {
  nlohmann::json j = {
      {"prompt_ids", req.prompt}, {"token_ids", s.tokens}, {"finish_reason", s.finish_reason}, {"ttft_ms", s.ttft_ms}};
  if (with_text) j["text"] = s.text;
  if (logprobs > 0) {
    nlohmann::json lp = nlohmann::json::array();
    for (const SampledToken& t : s.sampled) {
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& x : t.top) top.push_back({{"token", x.token}, {"logprob", x.logprob}});
      lp.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top", top}});
    }
    j["logprobs"] = lp;
  }
  return j;
}

std::string frac_text(double f, double bw) {
  return f < 0 ? std::string("n/a") : fmt::format("{:.1f}% of {:.0f} GB/s", 100 * f, bw);
}

Status write_logits(const std::string& path, const GenerateResult& r, int64_t vocab) {
  std::vector<float> all;
  for (const SequenceResult& s : r.seqs) all.insert(all.end(), s.first_logits.begin(), s.first_logits.end());
  Tensor t = Tensor::from_vector(DType::F32, {static_cast<int64_t>(r.seqs.size()), vocab}, all);
  return write_npy(path, t);
}

Status run(const Options& o) {
  const fs::path dir = o.model_dir;
  if (!fs::is_directory(dir)) return Status::NotFound("'{}' is not a model folder", o.model_dir);
  GPUOPT_ASSIGN_OR_RETURN(LlmConfig cfg, load_llm_config(dir));
  const DType dt = llm_compute_dtype(o.runner, cfg);

  // The tokenizer: needed for text prompts and stop strings; otherwise used when it loads.
  std::unique_ptr<Tokenizer> tok;
  const bool need_text = !o.prompt.empty() || !o.stop.empty();
  if (fs::exists(dir / "tokenizer.json")) {
    auto t = Tokenizer::from_file(dir / "tokenizer.json");
    if (t.ok())
      tok = std::move(*t);
    else if (need_text)
      return t.status();
    else if (!o.json)
      fmt::print(stderr, "gpuopt: warning: {} (no text output)\n", t.status().to_string());
  } else if (need_text) {
    return Status::NotFound("'{}' has no tokenizer.json: give --prompt-ids instead of --prompt", o.model_dir);
  }

  SamplingParams sp = o.sp;
  sp.stop = o.stop;
  sp.stop_token_ids = o.stop_ids;
  sp.seed = o.seed ? o.seed : std::optional<uint64_t>(std::random_device{}());
  std::vector<GenerateRequest> prompts;
  auto add_prompt = [&](const std::string& text, std::vector<int64_t> ids) -> Status {
    GenerateRequest r;
    r.params = sp;
    if (!text.empty()) {
      if (!tok) return Status::NotFound("'{}' has no usable tokenizer.json for text prompts", o.model_dir);
      r.prompt = tok->encode(text, /*add_special_tokens=*/true);
    } else {
      r.prompt = std::move(ids);
    }
    prompts.push_back(std::move(r));
    return Status::Ok();
  };
  if (!o.prompt.empty()) GPUOPT_RETURN_IF_ERROR(add_prompt(o.prompt, {}));
  if (!o.prompt_ids.empty()) {
    GPUOPT_ASSIGN_OR_RETURN(auto ids, parse_ids(o.prompt_ids, "--prompt-ids"));
    GPUOPT_RETURN_IF_ERROR(add_prompt("", std::move(ids)));
  }
  if (!o.prompts_file.empty()) {
    GPUOPT_ASSIGN_OR_RETURN(auto lines, read_prompts(o.prompts_file));
    for (auto& [text, ids] : lines) GPUOPT_RETURN_IF_ERROR(add_prompt(text, std::move(ids)));
  }
  if (prompts.empty() && !o.bench)
    return Status::InvalidArgument("give a prompt: --prompt TEXT, --prompt-ids 1,2,3 or --prompts FILE");
  // --batch N: N sequences at once; fewer prompts repeat, more run N at a time.
  std::vector<std::vector<GenerateRequest>> groups;
  if (!prompts.empty()) {
    const size_t n = std::max(prompts.size(), static_cast<size_t>(o.batch));
    for (size_t i = 0; i < n; i += static_cast<size_t>(o.batch)) {
      groups.emplace_back();
      for (size_t k = i; k < std::min(n, i + static_cast<size_t>(o.batch)); ++k)
        groups.back().push_back(prompts[k % prompts.size()]);
    }
  }

  std::unique_ptr<Checkpoint> ck;
  if (o.random_weights) {
    ck = random_checkpoint(cfg, cfg.dtype, o.seed.value_or(0));
  } else {
    GPUOPT_ASSIGN_OR_RETURN(ck, open_checkpoint(dir, cfg));
  }
  RunnerOptions ro = runner_options(o.runner, cfg);
  ro.max_step_tokens = o.max_step_tokens;
  ro.max_batch = static_cast<int>(o.bench ? *std::max_element(o.bench_batch.begin(), o.bench_batch.end())
                                          : std::max<int64_t>(o.batch, 1));
  BenchSweep sw{.prompt_lens = o.bench_prompt,
                .gen_lens = o.bench_gen,
                .batches = o.bench_batch,
                .seed = o.seed.value_or(0),
                .max_step_tokens = o.max_step_tokens};
  if (!o.runner.device.is_cuda()) {
    // The CPU cache is sized to the work (a context-long default would be gigabytes for real models).
    int64_t need = 1;
    for (const auto& g : groups) need = std::max(need, blocks_needed(cfg, g, ro.block_size));
    if (o.bench) need = std::max(need, bench_blocks_needed(cfg, sw, ro.block_size));
    ro.num_kv_blocks = need;
  }
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, make_llm_runner(o.runner, cfg, *ck, ro));
  const double bw = device_bandwidth_gbs(o);

  if (o.bench) {
    GPUOPT_ASSIGN_OR_RETURN(auto rows, run_bench(*runner, sw, bw));
    if (o.json) {
      fmt::print("{}\n", nlohmann::json{{"model", o.model_dir},
                                        {"architecture", cfg.architecture},
                                        {"device", o.runner.device.to_string()},
                                        {"precision", dtype_name(dt)},
                                      {"weights", cfg.quant.describe()},
                                        {"bandwidth_gbs", bw > 0 ? nlohmann::json(bw) : nlohmann::json()},
                                        {"rows", bench_json(rows)}}
                             .dump(2));
    } else {
      fmt::print("{} on {} ({}{}), roofline against {}\n{}", o.model_dir, o.runner.device.to_string(), dtype_name(dt),
                 cfg.quant.method == WeightQuant::Method::None ? std::string()
                                                               : fmt::format(", weights {}", cfg.quant.describe()),
                 bw > 0 ? fmt::format("{:.0f} GB/s", bw) : std::string("n/a (give --bandwidth-gbs)"),
                 bench_table(rows));
    }
    return Status::Ok();
  }

  GenerateOptions go;
  go.tokenizer = tok.get();
  go.max_step_tokens = o.max_step_tokens;
  go.bandwidth_gbs = bw;
  go.capture_first_logits = !o.dump_logits.empty();
  const bool stream = !o.json && groups.size() == 1 && groups[0].size() == 1;
  if (stream && tok)
    go.on_text = [](size_t, const std::string& s) {
      fmt::print("{}", s);
      std::fflush(stdout);
    };
  if (stream && !tok)
    go.on_token = [](size_t, const SampledToken& t) {
      fmt::print("{} ", t.token);
      std::fflush(stdout);
    };
  nlohmann::json seqs = nlohmann::json::array();
  GenerateResult last;
  for (const auto& g : groups) {
    GPUOPT_ASSIGN_OR_RETURN(GenerateResult r, generate(*runner, g, go));
    if (!o.dump_logits.empty() && &g == &groups.front())
      GPUOPT_RETURN_IF_ERROR(write_logits(o.dump_logits, r, cfg.vocab_size));
    for (size_t i = 0; i < r.seqs.size(); ++i) {
      if (o.json) {
        seqs.push_back(seq_json(g[i], r.seqs[i], tok != nullptr, o.sp.logprobs));
      } else if (stream) {
        fmt::print("\n");
      } else {
        fmt::print("--- sequence {} ({})\n{}\n", seqs.size(), r.seqs[i].finish_reason,
                   tok ? r.seqs[i].text : fmt::format("{}", fmt::join(r.seqs[i].tokens, " ")));
        seqs.push_back(nullptr);
      }
    }
    last = std::move(r);
  }
  // Timing of the last group (the only one unless --prompts holds more than --batch prompts).
  const nlohmann::json roof = last.roofline_frac < 0 ? nlohmann::json() : nlohmann::json(last.roofline_frac);
  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"model", o.model_dir},
                                      {"architecture", cfg.architecture},
                                      {"device", o.runner.device.to_string()},
                                      {"precision", dtype_name(dt)},
                                      {"weights", cfg.quant.describe()},
                                      {"kv_cache",
                                       {{"dtype", kv_cache_dtype_name(ro.kv_cache_dtype)},
                                        {"blocks", runner->num_kv_blocks()},
                                        {"block_size", runner->block_size()},
                                        {"bytes_per_token", kv_cache_bytes_per_token(cfg, ro.kv_cache_dtype, dt)}}},
                                      {"sequences", seqs},
                                      {"prompt_tokens", last.prompt_tokens},
                                      {"generated_tokens", last.generated_tokens},
                                      {"ttft_ms", last.ttft_ms},
                                      {"tok_s", last.tok_s},
                                      {"itl_p50_ms", last.itl_p50_ms},
                                      {"itl_p99_ms", last.itl_p99_ms},
                                      {"total_ms", last.total_ms},
                                      {"roofline_frac", roof},
                                      {"bandwidth_gbs", bw > 0 ? nlohmann::json(bw) : nlohmann::json()}}
                           .dump(2));
  } else {
    fmt::print(
        stderr,
        "{} prompt + {} generated tokens: TTFT {:.1f} ms, {:.1f} tok/s, ITL p50 {:.2f} ms p99 {:.2f} ms, roofline {}\n",
        last.prompt_tokens, last.generated_tokens, last.ttft_ms, last.tok_s, last.itl_p50_ms, last.itl_p99_ms,
        frac_text(last.roofline_frac, bw));
  }
  return Status::Ok();
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("generate",
                                 "Generate text with a Hugging Face Llama / Mistral / Qwen2 folder (config.json, "
                                 "*.safetensors, tokenizer.json) on the CPU or a CUDA device");
  cmd->add_option("model", o->model_dir, "Model folder (config.json, model.safetensors or shards, tokenizer.json)")
      ->required();
  cmd->add_option("--prompt", o->prompt, "Prompt text (needs tokenizer.json; BOS added as the tokenizer does)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids: 1,2,3");
  cmd->add_option("--prompts", o->prompts_file,
                  "File of prompts, one per line: text, or a JSON list of token ids like [1, 2, 3]");
  cmd->add_option("--batch", o->batch, "Sequences generated together (prompts repeat to fill it; default 1)")
      ->check(int_range(1, 4096));
  cmd->add_option("--max-new-tokens", o->sp.max_new_tokens, "Tokens to generate per sequence (default 16)")
      ->check(int_range(1, 1 << 24));
  cmd->add_option("--temperature", o->sp.temperature, "0: greedy (default 1)")->check(real_range(0, 100));
  cmd->add_option("--top-k", o->sp.top_k, "Keep the k most probable tokens (0: off)")->check(int_range(0));
  cmd->add_option("--top-p", o->sp.top_p, "Nucleus: keep the most probable tokens up to this mass (1: off)")
      ->check(real_range(1e-9, 1));
  cmd->add_option("--min-p", o->sp.min_p, "Keep tokens at least this fraction of the best one's probability (0: off)")
      ->check(real_range(0, 1));
  cmd->add_option("--repetition-penalty", o->sp.repetition_penalty,
                  "Hugging Face's: >1 discourages tokens of the prompt and output (1: off)")
      ->check(real_range(1e-6, 100));
  cmd->add_option("--presence-penalty", o->sp.presence_penalty, "OpenAI's, over the output (0: off)")
      ->check(real_range(-2, 2));
  cmd->add_option("--frequency-penalty", o->sp.frequency_penalty, "OpenAI's, over the output (0: off)")
      ->check(real_range(-2, 2));
  cmd->add_option("--seed", o->seed, "Sampling seed (sequence i uses seed + i; also --random-weights' seed)");
  cmd->add_option("--stop", o->stop, "Stop when the text contains this string (repeatable; needs tokenizer.json)");
  cmd->add_option("--stop-id", o->stop_ids, "Stop at this token id (repeatable), besides the model's EOS");
  cmd->add_flag("--ignore-eos", o->sp.ignore_eos, "Keep generating past EOS");
  cmd->add_option("--logprobs", o->sp.logprobs, "With --json: the top N log-probabilities of each position")
      ->check(int_range(0, 100));
  add_llm_runner_options(cmd, &o->runner);
  cmd->add_option("--max-step-tokens", o->max_step_tokens, "Most tokens per step: prefill chunk size (default 512)")
      ->check(int_range(1, 1 << 20));
  cmd->add_flag("--random-weights", o->random_weights,
                "Seeded random weights from config.json alone (no safetensors needed), for timing");
  cmd->add_option("--bandwidth-gbs", o->bandwidth_gbs,
                  "Memory bandwidth for the decode roofline share (default: the device's measured or known figure)")
      ->check(real_range(1e-3, 1e6));
  cmd->add_flag("--json", o->json,
                "Print JSON: token ids, text, ttft_ms, tok_s, itl_p50_ms, itl_p99_ms, roofline_frac");
  cmd->add_flag("--bench", o->bench,
                "Sweep prompt length x output length x batch (random prompts, greedy, EOS ignored) and print a table");
  cmd->add_option("--bench-prompt", o->bench_prompt, "--bench prompt lengths (default 128,512)")
      ->delimiter(',')
      ->check(int_range(1, 1 << 24));
  cmd->add_option("--bench-gen", o->bench_gen, "--bench output lengths (default 128)")
      ->delimiter(',')
      ->check(int_range(1, 1 << 24));
  cmd->add_option("--bench-batch", o->bench_batch, "--bench batch sizes (default 1)")
      ->delimiter(',')
      ->check(int_range(1, 4096));
  cmd->add_option("--dump-logits", o->dump_logits,
                  "Write the first generated position's logits [sequences, vocab] as .npy");
  cmd->callback([o] { run_llm_command(o->runner, [&] { return run(*o); }); });
}
GPUOPT_REGISTER_COMMAND(44, setup);

}  // namespace
}  // namespace gpuopt::cli
