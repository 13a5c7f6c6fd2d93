// `gpuopt profile MODEL`: where the time goes. A Chrome trace (host track, GPU stream track,
// every node with shapes, dtype, bytes, FLOPs; on CUDA every kernel by name, CUPTI), the top-k nodes against the roofline of the
// ceilings `gpuopt bench` measured, and the share of the run spent in host gaps (docs/profile.md).
#include "backends/backend.h"
#include "core/device.h"
#include "cli/command.h"
#include "cli/engine_option.h"
#include "cli/device_option.h"
#include "core/table.h"
#include "profile/inputs.h"
#include "profile/profile.h"
#include "profile/trace.h"

#include <fmt/format.h>

#include <filesystem>

namespace gpuopt::cli {
namespace {

struct Options {
  std::string model;
  std::string device = "cpu";
  EngineFlags engine;  // --precision, --memory-limit, --kernel
  int64_t batch = 1;
  std::vector<std::string> dims;
  int warmup = 3;
  int runs = 1;
  int top = 10;
  std::vector<std::string> ceilings;
  std::string trace;
  bool no_trace = false;
  bool json = false;
  bool no_cuda_graphs = false;
  bool no_kernels = false;
  uint64_t seed = 0;
};

int run(const Options& o) {
  profile::ProfileOptions po;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.model, ec)) return report_error(Status::NotFound("model '{}' does not exist", o.model));
  po.model = o.model;
  auto device = parse_device(o.device);
  if (!device.ok()) return report_error(device.status(), true);
  auto eo = engine_options(o.engine, *device);
  if (!eo.ok()) return report_error(eo.status());
  po.session = session_options(*eo);
  po.session.cache_dir.clear();  // profile compiles from the graph it timed the import of: no plan cache
  po.session.cuda_graphs = !o.no_cuda_graphs;
  po.warmup = o.warmup;
  po.runs = o.runs;
  po.kernels = !o.no_kernels;
  auto dims = profile::parse_dims(o.dims);
  if (!dims.ok()) return report_error(dims.status(), true);
  std::optional<profile::Ceilings> ceilings;
  for (const std::string& path : o.ceilings) {  // several files (bench memory, bench compute): the best of each
    auto c = profile::read_ceilings(path);
    if (!c.ok()) return report_error(c.status());
    if (!ceilings) {
      ceilings = *c;
      continue;
    }
    ceilings->source += ", " + c->source;
    ceilings->bandwidth_GBps = std::max(ceilings->bandwidth_GBps, c->bandwidth_GBps);
    for (const auto& [k, v] : c->peak_TFLOPs) ceilings->peak_TFLOPs[k] = std::max(ceilings->peak_TFLOPs[k], v);
    if (ceilings->device.empty()) ceilings->device = c->device;
  }
  std::string trace_path = o.trace;
  if (trace_path.empty() && !o.no_trace) trace_path = std::filesystem::path(o.model).stem().string() + ".trace.json";

  std::fprintf(stderr, "profile: loading %s on %s (%s), %d warm-up run(s), %d node-by-node run(s)\n", o.model.c_str(),
               o.device.c_str(), o.engine.precision.c_str(), o.warmup, o.runs);
  auto r = profile::profile_model(po, [&](const Session& s) { return profile::random_feeds(s, o.batch, *dims, o.seed); });
  if (!r.ok()) return report_error(r.status());
  if (!r->kernels_recorded && !r->kernels_note.empty())
    std::fprintf(stderr, "profile: no kernel names: %s; the trace has node-level GPU slices only\n", r->kernels_note.c_str());
  const profile::Summary s = profile::summarize(*r, ceilings, o.top);
  if (!trace_path.empty()) {
    Status st = profile::write_trace_file(trace_path, profile::profile_trace(*r));
    if (!st.ok()) return report_error(st);
  }
  if (o.json) {
    nlohmann::json j = profile::summary_json(*r, s);
    j["trace"] = trace_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(trace_path);
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", profile::render_summary(*r, s));
    if (!trace_path.empty())
      fmt::print("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", trace_path);
  }
  return kExitOk;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "profile", "Where the time goes: a Chrome trace of every node, the top nodes against the roofline, host gaps");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  add_device_option(cmd, &o->device, "cpu (fast), cpu-ref (reference kernels), cuda or cuda:N when built in");
  add_engine_flags(cmd, &o->engine, kPrecisionFlag | kMemoryLimitFlag | kKernelFlag);
  cmd->add_option("--batch", o->batch, "Batch size of the random inputs (a dynamic leading dim)")->check(int_range(1, kMaxBatch));
  cmd->add_option("--dim", o->dims, "NAME=VALUE for another symbolic input dim (repeatable)");
  cmd->add_option("--warmup", o->warmup, "Ordinary runs first: plan caches, CUDA graph capture (default 3)")
      ->check(int_range(1, 100000));
  cmd->add_option("--runs", o->runs, "Node-by-node runs recorded (default 1)")->check(int_range(1, 1000));
  cmd->add_option("--top", o->top, "Nodes in the summary table (default 10)")->check(int_range(1, 100000));
  cmd->add_option("--ceilings", o->ceilings, "JSON of `gpuopt bench all --json` (or bench.json, or bench memory/compute --json; repeatable): roofline per node");
  cmd->add_option("--trace", o->trace, "Chrome trace-event file to write (default MODEL_STEM.trace.json)");
  cmd->add_flag("--no-trace", o->no_trace, "Write no trace file");
  cmd->add_option("--seed", o->seed, "Seed of the random inputs (default 0)");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs, "CUDA: warm-up runs node by node instead of as a CUDA graph");
  cmd->add_flag("--no-kernels", o->no_kernels, "CUDA: do not record each kernel with CUPTI (node-level GPU slices only)");
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(42, setup);

}  // namespace
}  // namespace gpuopt::cli
