// `gpuopt perplexity MODEL_DIR --text FILE`: the model's perplexity on a text, windows of
// --context tokens (llama.cpp's `perplexity`, Hugging Face's fixed-length recipe), on the CPU
// runner or the CUDA runner at any precision and with quantized kernels; --predictions writes the
// most probable token at every scored position, for greedy agreement between two runs.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/llm_runner_option.h"
#include "cli/progress.h"
#include "llm/checkpoint.h"
#include "llm/perplexity.h"
#include "llm/tokenizer.h"

namespace gpuopt::cli {
namespace {

using namespace gpuopt::llm;
namespace fs = std::filesystem;

struct Options {
  std::string model_dir, text_file, predictions;
  LlmRunnerFlags runner;
  int64_t context = 0;  // 0: 512, or the model's context if shorter
  int batch = 16;
  int64_t max_tokens = 0;
  bool json = false;
};

Status run(const Options& o) {
  const fs::path dir = o.model_dir;
  if (!fs::is_directory(dir)) return Status::NotFound("'{}' is not a model folder", o.model_dir);
  GPUOPT_ASSIGN_OR_RETURN(LlmConfig cfg, load_llm_config(dir));
  if (!fs::exists(dir / "tokenizer.json"))
    return Status::NotFound("'{}' has no tokenizer.json to read --text with", o.model_dir);
  GPUOPT_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file(dir / "tokenizer.json"));
  std::ifstream f(o.text_file, std::ios::binary);
  if (!f) return Status::NotFound("--text: '{}' cannot be read", o.text_file);
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<int32_t> ids, prefix;
  for (int64_t id : tok->encode(ss.str(), /*add_special_tokens=*/false)) ids.push_back(static_cast<int32_t>(id));
  // What the tokenizer puts before any text (Llama's BOS) starts every window.
  for (int64_t id : tok->encode("", /*add_special_tokens=*/true)) prefix.push_back(static_cast<int32_t>(id));

  GPUOPT_ASSIGN_OR_RETURN(auto ck, open_checkpoint(dir, cfg));
  const int64_t context = o.context > 0 ? o.context : std::min<int64_t>(512, cfg.max_position);
  RunnerOptions ro = runner_options(o.runner, cfg);
  const int64_t bs = ro.block_size;
  ro.max_batch = o.batch;
  ro.max_step_tokens = o.batch;  // one token per window per step
  // The CPU cache holds the batch's windows; CUDA's is sized from memory and may hold fewer.
  if (!o.runner.device.is_cuda()) ro.num_kv_blocks = o.batch * ((context + bs - 1) / bs);
  GPUOPT_ASSIGN_OR_RETURN(auto runner, make_llm_runner(o.runner, cfg, *ck, ro));

  PerplexityOptions po;
  po.context = context;
  po.batch = o.batch;
  po.max_tokens = o.max_tokens;
  po.keep_predictions = !o.predictions.empty();
  if (!o.json)
    po.on_progress = [](int64_t done, int64_t total) {
      progress_bar("perplexity", static_cast<size_t>(done), static_cast<size_t>(total));
    };
  const auto t0 = std::chrono::steady_clock::now();
  GPUOPT_ASSIGN_OR_RETURN(PerplexityResult r, perplexity(*runner, ids, prefix, po));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.predictions.empty()) {
    std::ofstream p(o.predictions);
    for (int32_t id : r.predictions) p << id << '\n';
    if (!p) return Status::Internal("--predictions: '{}' cannot be written", o.predictions);
  }
  const DType dt = llm_compute_dtype(o.runner, cfg);
  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"model", o.model_dir},
                                      {"device", o.runner.device.to_string()},
                                      {"precision", dtype_name(dt)},
                                      {"weights", cfg.quant.describe()},
                                      {"quant_kernels", o.runner.quant_kernels},
                                      {"context", context},
                                      {"windows", r.windows},
                                      {"scored_tokens", r.scored_tokens},
                                      {"nll", r.nll_sum / static_cast<double>(r.scored_tokens)},
                                      {"perplexity", r.perplexity},
                                      {"top1", r.top1},
                                      {"seconds", secs}}
                           .dump(2));
  } else {
    fmt::print("{} on {} ({}, weights {}): perplexity {:.4f} over {} tokens ({} windows of {}), top-1 {:.1f}%, "
               "{:.1f} s\n",
               o.model_dir, o.runner.device.to_string(), dtype_name(dt), cfg.quant.describe(), r.perplexity,
               r.scored_tokens, r.windows, context, 100 * r.top1, secs);
  }
  return Status::Ok();
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("perplexity",
                                 "Perplexity of a language-model folder on a text file (windows of --context tokens)");
  cmd->add_option("model", o->model_dir, "Model folder (config.json, safetensors, tokenizer.json)")->required();
  cmd->add_option("--text", o->text_file, "Text file, tokenized with the model's tokenizer.json")->required();
  cmd->add_option("--context", o->context, "Tokens per window, the tokenizer's BOS included (default 512, or the model's context if shorter)")
      ->check(int_range(2, 1 << 20));
  cmd->add_option("--batch", o->batch, "Windows evaluated together (default 16)")->check(int_range(1, 4096));
  cmd->add_option("--max-tokens", o->max_tokens, "Score only the text's first N tokens (default: all)")
      ->check(int_range(1));
  add_llm_runner_options(cmd, &o->runner);
  cmd->add_option("--predictions", o->predictions,
                  "Write the most probable token id at each scored position, one per line");
  cmd->add_flag("--json", o->json, "Print JSON: perplexity, nll, top1, scored_tokens, windows, seconds");
  cmd->callback([o] { run_llm_command(o->runner, [&] { return run(*o); }); });
}
GPUOPT_REGISTER_COMMAND(46, setup);

}  // namespace
}  // namespace gpuopt::cli
