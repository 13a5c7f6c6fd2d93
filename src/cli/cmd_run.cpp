// `gpuopt run MODEL.onnx`: run a model on given (.npy) or random inputs, write outputs as .npy,
// report latency (min / median / p99) and throughput.
#include "backends/backend.h"
#include "cli/command.h"
#include "cli/engine_option.h"
#include "cli/device_option.h"
#include "core/env.h"
#include "core/thread_pool.h"
#include "core/npy.h"
#include "core/table.h"
#include "gpuopt/session.h"
#include "ir/graph.h"
#include "quant/precision_session.h"
#include "profile/inputs.h"
#include "profile/profile.h"
#include "profile/trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <random>

namespace gpuopt::cli {
namespace {

struct Options {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> dims;    // NAME=VALUE for symbolic dims of random inputs
  bool random = false;
  int64_t batch = 1;
  std::string output_dir;
  int iterations = 10;
  int warmup = 1;
  Device device = Device::cpu();
  EngineFlags engine;  // --precision, --memory-limit, --cache-dir, --kernel
  bool json = false;
  bool profile = false;
  bool no_cuda_graphs = false;
  uint64_t seed = 0;
  std::string trace;  // Chrome trace of one more run, node by node (docs/profile.md)
};

// Random values a model accepts: floats uniform in [-1, 1); integers in [0, 8) so they are
// valid indices/token ids for small vocabularies; bools fair coins.
Result<Tensor> random_tensor(DType dt, const Shape& shape, std::mt19937_64& rng, const std::string& name) {
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dt, shape, name));
  std::uniform_real_distribution<double> uf(-1.0, 1.0);
  std::uniform_int_distribution<int> ui(0, 7);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::String) t.strings()[static_cast<size_t>(i)] = fmt::format("s{}", ui(rng));
    else if (dtype_is_float(dt)) t.set_f64(i, uf(rng));
    else if (dt == DType::Bool) t.set_f64(i, ui(rng) & 1);
    else t.set_f64(i, ui(rng));
  }
  return t;
}

Result<Tensor> make_random_input(const TensorInfo& in, const Options& o, const std::map<std::string, int64_t>& dims,
                                 std::mt19937_64& rng) {
  GPUOPT_ASSIGN_OR_RETURN(Shape shape,
                          profile::random_input_shape(in, o.batch, dims, fmt::format("--input {}=FILE.npy", in.name)));
  return random_tensor(in.dtype, shape, rng, in.name);
}

std::string file_name_for(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return s.empty() ? std::string("output") : s;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

// Per-op-type sums and the slowest nodes of one profiled run (each node timed on its own, with
// a host wait after it, so the total exceeds a normal run's latency).
struct OpSum {
  std::string op, device;
  int nodes = 0;
  double wall_us = 0, gpu_us = 0;
};
std::vector<OpSum> sum_by_op(const RunProfile& p) {
  std::map<std::pair<std::string, std::string>, OpSum> m;
  for (const NodeTime& n : p.nodes) {
    OpSum& s = m[{n.op, n.device}];
    s.op = n.op;
    s.device = n.device;
    ++s.nodes;
    s.wall_us += n.wall_us;
    s.gpu_us += n.gpu_us;
  }
  std::vector<OpSum> v;
  for (auto& [k, s] : m) v.push_back(s);
  std::sort(v.begin(), v.end(), [](const OpSum& a, const OpSum& b) { return a.wall_us > b.wall_us; });
  return v;
}

nlohmann::json profile_json(const RunProfile& p) {
  nlohmann::json j;
  for (const OpSum& s : sum_by_op(p))
    j["ops"].push_back({{"op", s.op}, {"device", s.device}, {"nodes", s.nodes}, {"wall_us", s.wall_us}, {"gpu_us", s.gpu_us}});
  for (const NodeTime& n : p.nodes)
    j["nodes"].push_back({{"node", n.node}, {"op", n.op}, {"device", n.device}, {"wall_us", n.wall_us}, {"gpu_us", n.gpu_us}});
  return j;
}

void print_profile(const RunProfile& p) {
  double total = 0, gpu = 0;
  bool on_gpu = false;  // GPU columns only when some node ran there
  for (const NodeTime& n : p.nodes) {
    total += n.wall_us;
    gpu += n.gpu_us;
    on_gpu = on_gpu || n.device != "cpu";
  }
  fmt::print("\nprofile: one run, node by node with a wait after each ({} nodes, {} in all{})\n", p.nodes.size(),
             format_duration_us(total), on_gpu ? fmt::format(", {} on the GPU", format_duration_us(gpu)) : "");
  std::vector<std::string> head{"op", "device", "nodes", "wall", "wall %"};
  if (on_gpu) head.insert(head.end(), {"gpu", "gpu/node"});
  Table t(head);
  for (const OpSum& s : sum_by_op(p)) {
    std::vector<std::string> row{s.op, s.device, fmt::format("{}", s.nodes), format_duration_us(s.wall_us),
                                 fmt::format("{:.1f}", total > 0 ? 100.0 * s.wall_us / total : 0.0)};
    if (on_gpu) row.insert(row.end(), {format_duration_us(s.gpu_us), format_duration_us(s.gpu_us / s.nodes)});
    t.add(row);
  }
  fmt::print("{}", t.render());
  std::vector<const NodeTime*> top;
  for (const NodeTime& n : p.nodes) top.push_back(&n);
  std::sort(top.begin(), top.end(), [](const NodeTime* a, const NodeTime* b) { return a->wall_us > b->wall_us; });
  if (top.size() > 10) top.resize(10);
  std::vector<std::string> nhead{"slowest nodes", "op", "device", "wall"};
  if (on_gpu) nhead.push_back("gpu");
  Table n(nhead);
  for (const NodeTime* x : top) {
    std::vector<std::string> row{x->node, x->op, x->device, format_duration_us(x->wall_us)};
    if (on_gpu) row.push_back(format_duration_us(x->gpu_us));
    n.add(row);
  }
  fmt::print("{}", n.render());
}

// What --precision means on --device: on the GPU, fp16/bf16 tensor-core kernels; on the CPU
// reference, the same converted graph (weights and activations rounded to f16/bf16 between ops,
// as ONNX Runtime's CPU provider runs an fp16 model): its numerics, not a speed-up.
std::string precision_note(const Options& o) {
  if (o.engine.precision == "fp32" || o.device.is_cuda()) return o.engine.precision;
  if (o.engine.precision == "fp8") return "fp8 (CPU reference: e4m3 GEMMs emulated, f32 rest)";
  return fmt::format("{} (CPU reference: {} tensors, f32 math: {} numerics, not {} speed)", o.engine.precision,
                     o.engine.precision == "fp16" ? "f16" : "bf16", o.engine.precision, o.engine.precision);
}

// The inputs of one run: --input files by name, --random-inputs for the rest. `usage` is set when
// the command line is what is wrong (exit 2).
Result<NamedTensors> make_feeds(const Options& o, const Session& s, bool* usage) {
  std::map<std::string, int64_t> dims;
  for (const auto& kv : o.dims) {
    const size_t eq = kv.find('=');
    const int64_t v = eq == std::string::npos ? 0 : std::atoll(kv.c_str() + eq + 1);
    *usage = v <= 0;
    if (*usage) return Status::InvalidArgument("--dim '{}': expected NAME=POSITIVE_INT", kv);
    dims[kv.substr(0, eq)] = v;
  }
  std::map<std::string, Tensor> given;
  for (const auto& kv : o.inputs) {
    const size_t eq = kv.find('=');
    *usage = eq == std::string::npos || eq == 0;
    if (*usage) return Status::InvalidArgument("--input '{}': expected NAME=FILE.npy", kv);
    auto t = read_npy(kv.substr(eq + 1));
    if (!t.ok()) return t.status().with_context(fmt::format("--input {}", kv.substr(0, eq)));
    given[kv.substr(0, eq)] = std::move(*t);
  }
  std::mt19937_64 rng(o.seed);
  NamedTensors feeds;
  *usage = true;  // from here on each error is about the command line
  for (const auto& in : s.inputs()) {
    auto it = given.find(in.name);
    if (it != given.end()) {
      feeds.emplace_back(in.name, it->second);
      given.erase(it);
    } else if (o.random) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, make_random_input(in, o, dims, rng));
      feeds.emplace_back(in.name, std::move(t));
    } else {
      return Status::InvalidArgument("missing input '{}' ({} {}): give --input {}=FILE.npy or --random-inputs", in.name,
                                     dtype_name(in.dtype), in.shape_string(), in.name);
    }
  }
  *usage = false;
  for (const auto& [name, t] : given) feeds.emplace_back(name, t);  // Session::run names the unknown one
  return feeds;
}

int run(const Options& o) {
  auto eo = engine_options(o.engine, o.device);
  if (!eo.ok()) return report_error(eo.status());
  SessionOptions so = session_options(*eo);
  so.cuda_graphs = !o.no_cuda_graphs;
  using clock = std::chrono::steady_clock;
  const auto load_start = clock::now();
  // int8/fp8 on a float model: calibrated on this run's inputs (quant/precision_session.h).
  bool feeds_usage = false;
  auto loaded = quant::load_at_precision(
      o.model, so, [&](const Session& s) { return make_feeds(o, s, &feeds_usage); },
      [&](std::string_view precision) {
        if (precision == "fp8")
          fmt::print(stderr,
                     "gpuopt: warning: calibrating fp8 scales on this run's {} inputs; the accuracy is unknown without "
                     "real data (docs/quantization.md)\n",
                     o.random ? "random" : "given");
        else
          fmt::print(stderr,
                     "gpuopt: warning: {} has no QDQ nodes: calibrating int8 scales on this run's {} inputs; the "
                     "accuracy is unknown without real data (gpuopt quantize --calibration DATA, docs/quantization.md)\n",
                     o.model, o.random ? "random" : "given");
      });
  if (!loaded.ok())
    return report_error(loaded.status(), feeds_usage || loaded.status().message().rfind("--precision", 0) == 0);
  const double load_s = loaded->load_s;
  const NamedTensors& feeds = loaded->feeds;
  nlohmann::json fp8_info;
  if (const auto& fm = loaded->fp8) {
    fmt::print(stderr, "gpuopt: fp8: {} GEMMs in e4m3, {} kept in float{}{}\n", fm->rewritten, fm->kept.size(),
               fm->kept.empty() ? "" : ": ", fm->kept.empty() ? "" : fm->kept.front() + (fm->kept.size() > 1 ? ", ..." : ""));
    fp8_info = {{"gemms", fm->rewritten}, {"chained", fm->chained}, {"shared", fm->shared}, {"norm", fm->normed}, {"kept", fm->kept}};
  }
  const Session& s = *loaded->session;

  int64_t batch = 1;
  if (!feeds.empty() && feeds[0].second.rank() > 0 && !s.inputs().empty() && s.inputs()[0].dynamic_batch())
    batch = feeds[0].second.dim(0);

  Result<NamedTensors> outs = Status::Internal("not run");
  double first_run_ms = 0;  // the first run: algorithm choice and plan building included
  std::vector<double> ms, device_ms;  // device_ms: the compute alone, CUDA events (CUDA only)
  RunProfile last;  // how the last timed run went (CUDA: eager, graph capture or replay)
  // Process CPU time over the timed runs: divided by their wall time, the cores they kept busy
  // (how far a CPU run spreads over GPUOPT_NUM_THREADS).
  auto cpu_now_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
  };
  double cpu_ms = 0;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    last = RunProfile{};
    if (i == o.warmup) cpu_ms = -cpu_now_ms();
    const auto t0 = clock::now();
    outs = s.run(feeds, &last);
    const double dt = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (!outs.ok()) return report_error(outs.status());
    if (i == 0) first_run_ms = dt;
    if (i >= o.warmup) ms.push_back(dt);
    if (i >= o.warmup && last.device_us > 0) device_ms.push_back(last.device_us / 1e3);
  }
  cpu_ms += cpu_now_ms();
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return report_error(Status::InvalidArgument("--output-dir '{}': {}", o.output_dir, ec.message()));
    for (const auto& [name, t] : *outs) {
      Status st = write_npy((std::filesystem::path(o.output_dir) / (file_name_for(name) + ".npy")).string(), t);
      if (!st.ok()) return report_error(st);
    }
  }
  RunProfile prof;
  if (o.profile) {
    prof.per_node = true;
    auto p = s.run(feeds, &prof);
    if (!p.ok()) return report_error(p.status());
  }
  if (!o.trace.empty()) {  // one more run node by node, as `gpuopt profile` records it
    profile::ProfileResult tr;
    tr.model = o.model;
    tr.device = o.device.to_string();
    tr.precision = o.engine.precision;
    tr.batch = batch;
    tr.spans.push_back({"load", "load", std::chrono::duration<double, std::micro>(load_start.time_since_epoch()).count(),
                        load_s * 1e6, {{"file", o.model}}});
    Status st = profile::profile_runs(s, feeds, 1, &tr);
    if (st.ok() && !tr.kernels_recorded && !tr.kernels_note.empty())
      std::fprintf(stderr, "run --trace: no kernel names: %s; node-level GPU slices only\n", tr.kernels_note.c_str());
    if (st.ok()) st = profile::write_trace_file(o.trace, profile::profile_trace(tr));
    if (!st.ok()) return report_error(st);
  }
  const double mn = *std::min_element(ms.begin(), ms.end());
  const double med = percentile(ms, 0.5), p99 = percentile(ms, 0.99);
  const double throughput = static_cast<double>(batch) * 1000.0 / med;

  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["device"] = o.device.to_string();
    j["precision"] = o.engine.precision;
    if (!fp8_info.is_null()) j["fp8"] = fp8_info;
    j["batch"] = batch;
    j["iterations"] = o.iterations;
    j["latency_ms"] = {{"min", mn}, {"median", med}, {"p99", p99}};
    j["throughput_per_s"] = throughput;
    // CPU time of the whole process per timed run (all threads); on the CPU, / latency = busy cores.
    j["cpu_ms_per_run"] = cpu_ms / o.iterations;
    if (o.device.kind == DeviceKind::kCpu) j["cpu_threads"] = cpu_threads();
    j["load_s"] = load_s;  // Session::load: import, passes, placement, constant upload
    j["first_run_ms"] = first_run_ms;
    // Start -> ready: the load and the first run, which chooses each shape's plans (the plan
    // cache's part); cold and warm starts compare here.
    j["start_s"] = load_s + first_run_ms / 1e3;
    const PlanCacheStatus pc = s.plan_cache();
    j["plan_cache"] = {{"state", pc.state}, {"path", pc.path}, {"entries", pc.entries}, {"note", pc.note}};
    if (last.peak_device_bytes > 0) j["peak_device_bytes"] = last.peak_device_bytes;
    if (last.peak_intermediate_bytes > 0) j["peak_intermediate_bytes"] = last.peak_intermediate_bytes;
    if (!device_ms.empty())
      j["device_ms"] = {{"min", *std::min_element(device_ms.begin(), device_ms.end())},
                        {"median", percentile(device_ms, 0.5)}};
    if (!last.mode.empty()) {
      j["execution"] = last.mode;
      if (!last.graph_note.empty()) j["execution_note"] = last.graph_note;
    }
    if (o.profile) j["profile"] = profile_json(prof);
    for (const auto& [name, t] : feeds) j["inputs"].push_back({{"name", name}, {"tensor", t.describe()}});
    for (const auto& [name, t] : *outs) {
      nlohmann::json oj = {{"name", name}, {"tensor", t.describe()}};
      if (!o.output_dir.empty()) oj["file"] = (std::filesystem::path(o.output_dir) / (file_name_for(name) + ".npy")).string();
      j["outputs"].push_back(oj);
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("model   {}  (opset {}, device {}, precision {})\n", o.model, s.opset(), o.device.to_string(), precision_note(o));
  Table io({"", "name", "tensor", "min", "max", "mean"});
  auto stats = [](const Tensor& t, std::vector<std::string>* row) {
    if (t.dtype() == DType::String || t.numel() == 0) {
      row->insert(row->end(), {"", "", ""});
      return;
    }
    double lo = t.get_f64(0), hi = lo, sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.get_f64(i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    row->insert(row->end(), {fmt::format("{:.4g}", lo), fmt::format("{:.4g}", hi), fmt::format("{:.4g}", sum / t.numel())});
  };
  for (const auto& [name, t] : feeds) {
    std::vector<std::string> row{"input", name, t.describe()};
    stats(t, &row);
    io.add(row);
  }
  for (const auto& [name, t] : *outs) {
    std::vector<std::string> row{"output", name, t.describe()};
    stats(t, &row);
    io.add(row);
  }
  fmt::print("{}\n", io.render());
  Table lat({"iterations", "batch", "min", "median", "p99", "throughput"});
  lat.add({fmt::format("{}", o.iterations), fmt::format("{}", batch), format_duration_us(mn * 1e3),
           format_duration_us(med * 1e3), format_duration_us(p99 * 1e3), fmt::format("{:.1f} samples/s", throughput)});
  fmt::print("{}", lat.render());
  if (!device_ms.empty())
    fmt::print("device time (compute alone, inputs already on the GPU): median {}, min {}\n",
               format_duration_us(percentile(device_ms, 0.5) * 1e3),
               format_duration_us(*std::min_element(device_ms.begin(), device_ms.end()) * 1e3));
  {
    const PlanCacheStatus pc = s.plan_cache();
    std::string cache = pc.state == "off" ? "" : fmt::format("; plan cache {}", pc.state);
    if (pc.state == "warm") cache += fmt::format(" ({} choices)", pc.entries);
    if (!pc.note.empty() && pc.state != "off") cache += fmt::format(" ({})", pc.note);
    if (!pc.path.empty()) cache += fmt::format(": {}", pc.path);
    fmt::print("start: {:.2f} s (load {:.2f} s + first run {}){}\n", load_s + first_run_ms / 1e3, load_s,
               format_duration_us(first_run_ms * 1e3), cache);
  }
  if (!last.mode.empty())
    fmt::print("execution: {}{}\n", last.mode == "graph" ? "CUDA graph replay" : last.mode,
               last.graph_note.empty() ? "" : fmt::format(" ({})", last.graph_note));
  if (o.profile) print_profile(prof);
  if (!o.output_dir.empty()) fmt::print("outputs written to {}/ as .npy\n", o.output_dir);
  return kExitOk;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("run", "Run a model on the CPU (or another device): outputs as .npy, latency and throughput");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  cmd->add_option("--input", o->inputs, "NAME=FILE.npy (repeatable)");
  cmd->add_flag("--random-inputs", o->random, "Fill inputs not given with --input with random values (seeded)");
  cmd->add_option("--batch", o->batch, "Batch size for random inputs with a dynamic leading dim")
      ->check(int_range(1, kMaxBatch));
  cmd->add_option("--dim", o->dims, "NAME=VALUE for another symbolic dim of random inputs (repeatable)");
  cmd->add_option("--output-dir", o->output_dir, "Write each output as DIR/<name>.npy");
  cmd->add_option("--iterations", o->iterations, "Timed runs (default 10)")->check(int_range(1, 1000000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs first (default 1)")->check(int_range(0, 1000000));
  add_device_option(cmd, &o->device, "cpu (the fast CPU backend), cpu-ref (the reference kernels), or cuda / cuda:N (a CUDA device by index) when built in");
  add_engine_flags(cmd, &o->engine, kPrecisionFlag | kMemoryLimitFlag | kCacheDirFlag | kKernelFlag);
  cmd->add_option("--seed", o->seed, "Seed of --random-inputs (default 0)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--profile", o->profile,
                "After the timed runs, one more node by node: time per op type and the slowest nodes");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs, "CUDA: run node by node instead of replaying a CUDA graph");
  cmd->add_option("--trace", o->trace, "After the timed runs, one more node by node into this Chrome trace file");
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(40, setup);

}  // namespace
}  // namespace gpuopt::cli
