// `gpuopt inspect MODEL`: opset, inputs/outputs, op histogram with FLOPs, parameters, backend support;
// with --optimized, the compiler's report (inspect_report.h).
#include "cli/command.h"
#include "cli/engine_option.h"
#include "cli/device_option.h"
#include "cli/inspect_report.h"
#include "core/device.h"
#include "core/table.h"
#include "engine/compile.h"
#include "gpuopt/session.h"
#include "ir/graph.h"
#include "llm/config_report.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "profile/inputs.h"
#include "quant/quantizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

namespace gpuopt::cli {
namespace {

struct Options {
  std::string model;
  bool json = false;
  bool optimized = false;
  bool verbose = false;  // with --optimized: the memory plan's offsets per tensor
  int64_t batch = 1;
  std::vector<std::string> dims;  // NAME=VALUE
  std::string device;             // --device: show where each node runs on that backend
  EngineFlags engine;  // --precision (with --optimized: the session's conversion and layout pass), --memory-limit, --kernel
};

struct OpRow {
  int count = 0;
  double flops = 0.0;
  bool flops_exact = true;  // false when some node had non-concrete shapes
  std::map<std::string, bool> support;
};

std::string format_flops(double f) {
  if (f >= 1e12) return fmt::format("{:.2f} T", f / 1e12);
  if (f >= 1e9) return fmt::format("{:.2f} G", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} M", f / 1e6);
  if (f >= 1e3) return fmt::format("{:.2f} k", f / 1e3);
  return fmt::format("{:.0f}", f);
}

// Placement on --device: per op type, how many nodes of the engine's graph (engine/compile.h
// analyze: the session's passes) run on that backend and how many fall back to the CPU backend.
struct PlacementCounts {
  std::string error;   // set when neither the backend nor its op table's placement is available
  std::string source;  // "op table" when decided without a device (static_placement)
  std::vector<std::string> fallbacks;  // one line per op type of CPU-fallback nodes, with reasons
  // op type -> nodes per NodePlace (device, cpu fallback, cpu shape math)
  std::map<std::string, std::array<int, 3>> ops;
  std::array<int, 3> total{};
};

PlacementCounts count_placement(const Graph& g, const Placement& where) {
  PlacementCounts p;
  p.error = where.error;
  if (!p.error.empty()) return p;
  p.fallbacks = where.fallbacks;
  if (where.source == "op table") p.source = "op table";
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const auto k = static_cast<size_t>(where.place[n]);
    ++p.ops[g.nodes()[n].op_type][k];
    ++p.total[k];
  }
  return p;
}

void print_placement(const PlacementCounts& p, const std::string& device, const std::string& precision) {
  if (!p.error.empty()) {
    fmt::print("\nplacement on {}: not available ({}); placement needs a {} device\n", device, p.error,
               device == "cuda" ? "CUDA" : device);
    return;
  }
  fmt::print("\nplacement on {} (graph after passes, {}{}):\n", device, precision,
             p.source.empty() ? "" : ", from the " + p.source + ": no device here");
  Table t({"op", "nodes", device, std::string(node_place_name(NodePlace::kCpuFallback)),
           std::string(node_place_name(NodePlace::kHostShapes))});
  auto row = [&](const std::string& name, const std::array<int, 3>& c) {
    t.add({name, fmt::format("{}", c[0] + c[1] + c[2]), fmt::format("{}", c[0]), fmt::format("{}", c[1]),
           fmt::format("{}", c[2])});
  };
  for (const auto& [op, c] : p.ops) row(op, c);
  t.add_separator();
  row("total", p.total);
  fmt::print("{}", t.render());
  for (const std::string& line : p.fallbacks) fmt::print("{}\n", line);
}

nlohmann::json value_json(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  std::vector<std::string> dims;
  for (int64_t d : v.info.rank_known ? v.info.shape : v.declared.shape) dims.push_back(g.symbol_name(d));
  return {{"name", v.name}, {"dtype", std::string(dtype_name(v.info.dtype))}, {"shape", dims}};
}

// --optimized --precision int8 on a float model: calibrated on seeded random inputs first (minmax,
// on the CPU reference), as `gpuopt run --precision int8` calibrates on its inputs, so the listing
// shows what run executes (the scales depend on the inputs; which nodes fold does not).
Status calibrate_on_random_inputs(const Options& o, Graph* g) {
  fmt::print(stderr,
             "gpuopt: warning: {} has no QDQ nodes: calibrating int8 scales on random inputs (batch {}) to show what "
             "`gpuopt run --precision int8` runs; the accuracy is unknown without real data (gpuopt quantize "
             "--calibration DATA, docs/quantization.md)\n",
             o.model, o.batch);
  GPUOPT_ASSIGN_OR_RETURN(onnx::ModelProto proto, quant::read_model_proto(o.model));  // the quantizer edits it
  SessionOptions so;
  so.optimize = false;
  GPUOPT_ASSIGN_OR_RETURN(auto session, Session::from_graph(*g, so));
  GPUOPT_ASSIGN_OR_RETURN(auto dims, profile::parse_dims(o.dims));
  GPUOPT_ASSIGN_OR_RETURN(NamedTensors feeds, profile::random_feeds(*session, o.batch, dims, 0));
  GPUOPT_ASSIGN_OR_RETURN(*g, quant::quantize_on_inputs(proto, o.model, session->inputs(), feeds, Device::cpu()));
  return Status::Ok();
}

int run(const Options& o) {
  if (llm::is_model_dir(o.model)) {  // a Hugging Face language-model folder (docs/llm.md)
    auto r = llm::inspect_model_dir(o.model, o.json);
    if (!r.ok()) return report_error(r.status());
    fmt::print("{}", *r);
    return kExitOk;
  }
  auto loaded = load_onnx_model(o.model);
  if (!loaded.ok()) return report_error(loaded.status());
  Graph& g = *loaded;
  if (o.optimized && o.engine.precision == "int8" &&
      std::none_of(g.nodes().begin(), g.nodes().end(),
                   [](const Node& n) { return n.op == Op::QuantizeLinear || n.op == Op::DequantizeLinear; })) {
    if (Status st = calibrate_on_random_inputs(o, &g); !st.ok()) return report_error(st);
  }
  // The session's stages for --device and --precision (engine/compile.h analyze: passes, layout_nhwc
  // for cuda at fp16/bf16, placement) on the graph as a Session compiles it, symbols unbound, so the
  // listing is what a run executes (a fusion that needs a known batch would show here and not run).
  // Without --optimized the listing is the model as imported and the placement that of fp32.
  // Symbols are bound after, for the FLOPs and the memory plan. --device was checked when the
  // command line was read.
  const Graph& declared = g;
  std::vector<std::pair<std::string, int64_t>> symbols;
  for (const std::string& kv : o.dims) {
    const size_t eq = kv.find('=');
    int64_t v = 0;
    if (eq == std::string::npos || (v = std::atoll(kv.c_str() + eq + 1)) <= 0)
      return report_error(Status::InvalidArgument("--dim '{}': expected NAME=POSITIVE_INT", kv), true);
    symbols.emplace_back(kv.substr(0, eq), v);
  }
  auto eo_or = engine_options(o.engine, o.device.empty() ? Device::cpu() : parse_device(o.device).value());
  if (!eo_or.ok()) return report_error(eo_or.status());
  EngineOptions eo = *eo_or;
  if (!o.optimized) eo.precision = Precision::kFp32;  // the listing is the model as imported
  std::optional<Compiled> compiled;
  Placement where;  // on --device, of the engine's graph
  if (o.optimized || !o.device.empty()) {
    auto c = analyze(g, eo);
    if (!c.ok()) return report_error(c.status());
    compiled = std::move(*c);
    where = compiled->placement();
  }
  // The listed graph with the symbols bound: FLOPs per node (engine/analysis.h node_costs, the
  // count `gpuopt profile` gives too) and, with --optimized, the memory plan of that batch.
  Compiled::AtShapes at;
  Status bound_st;
  if (o.optimized) {
    auto a = compiled->at_shapes(symbols, o.batch, &where);
    if (a.ok()) at = std::move(*a);
    else bound_st = a.status();
  } else if (auto b = bind_shapes(declared, symbols, o.batch); b.ok()) {
    at.bound = std::move(*b);
    at.costs = node_costs(at.bound);
  } else {
    bound_st = b.status();
  }
  if (!bound_st.ok()) {
    const bool usage = bound_st.message().find("no symbolic dim") != std::string::npos;
    return report_error(usage ? bound_st.with_context("--dim") : bound_st, usage);
  }
  const Graph& bound = at.bound;
  const std::vector<NodeCost>& costs = at.costs;
  const std::vector<BackendSupport> backends = support_per_backend(bound);
  std::map<std::string, OpRow> hist;
  double total = 0.0;
  bool total_exact = true;
  for (size_t i = 0; i < bound.nodes().size(); ++i) {
    OpRow& row = hist[bound.nodes()[i].op_type];
    ++row.count;
    if (!costs[i].folded) {  // folded away: a shape computation, no FLOPs counted
      row.flops += costs[i].flops;
      row.flops_exact = row.flops_exact && costs[i].concrete;
      total += costs[i].flops;
      total_exact = total_exact && costs[i].concrete;
    }
    for (const BackendSupport& b : backends) {
      const bool ok = b.available && b.node[i];
      auto it = row.support.find(b.name);
      row.support[b.name] = it == row.support.end() ? ok : (it->second && ok);
    }
  }
  PlacementCounts placement;
  if (!o.device.empty()) placement = count_placement(*compiled->graph, where);
  // --optimized: what the compiler did (fusions, layout, precision, placement, memory plan).
  std::optional<CompileReport> report;
  if (o.optimized) {
    const bool placed = !o.device.empty() && where.error.empty();
    report = build_compile_report(declared, bound, placed ? &where.place : nullptr, std::move(at.plan),
                                  std::move(at.plan_rules));
  }
  int64_t params = 0, param_bytes = 0;
  for (const Value& v : declared.values())
    if (v.constant) {
      params += v.constant->numel();
      param_bytes += static_cast<int64_t>(v.constant->nbytes());
    }

  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["ir_version"] = g.ir_version;
    j["opset"] = g.opset;
    j["producer"] = g.producer_name;
    j["nodes"] = bound.nodes().size();
    for (ValueId v : declared.inputs()) j["inputs"].push_back(value_json(declared, v));
    for (ValueId v : declared.outputs()) j["outputs"].push_back(value_json(declared, v));
    j["parameters"] = params;
    j["parameter_bytes"] = param_bytes;
    j["batch"] = o.batch;
    j["flops_total"] = total;
    j["flops_exact"] = total_exact;
    for (const auto& [op, r] : hist)
      j["ops"].push_back({{"op", op}, {"count", r.count}, {"flops", r.flops}, {"flops_exact", r.flops_exact}, {"support", r.support}});
    if (!o.device.empty()) {
      nlohmann::json pj{{"device", o.device}};
      if (!placement.error.empty()) {
        pj["error"] = placement.error;
      } else {
        if (!placement.source.empty()) pj["source"] = placement.source;
        pj["fallbacks"] = placement.fallbacks;
        pj["on_device"] = placement.total[0];
        pj["on_cpu"] = placement.total[1];
        pj["on_cpu_shape_math"] = placement.total[2];
        for (const auto& [op, c] : placement.ops)
          pj["ops"].push_back({{"op", op}, {"on_device", c[0]}, {"on_cpu", c[1]}, {"on_cpu_shape_math", c[2]}});
      }
      j["placement"] = pj;
    }
    if (report) j["compile"] = compile_report_json(bound, *report, o.verbose);
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("model     {}\nproducer  {}  (ir_version {}, opset {})\nnodes     {}{}\n", o.model,
             g.producer_name.empty() ? "?" : g.producer_name, g.ir_version, g.opset, bound.nodes().size(),
             o.optimized ? " (after passes)" : "");
  fmt::print("params    {} ({})\n\n", params, format_bytes(static_cast<double>(param_bytes)));
  Table io({"", "name", "dtype", "shape"});
  for (ValueId v : declared.inputs()) {
    const auto j = value_json(declared, v);
    io.add({"input", j["name"], j["dtype"], fmt::format("[{}]", fmt::join(j["shape"].get<std::vector<std::string>>(), ","))});
  }
  for (ValueId v : declared.outputs()) {
    const auto j = value_json(declared, v);
    io.add({"output", j["name"], j["dtype"], fmt::format("[{}]", fmt::join(j["shape"].get<std::vector<std::string>>(), ","))});
  }
  fmt::print("{}\n", io.render());
  std::vector<std::string> header{"op", "count", fmt::format("FLOPs (batch {})", o.batch)};
  for (const BackendSupport& b : backends) header.push_back(b.name);
  Table ops(header);
  for (const auto& [op, r] : hist) {
    std::vector<std::string> row{op, fmt::format("{}", r.count), (r.flops_exact ? "" : "~") + format_flops(r.flops)};
    for (const BackendSupport& b : backends) row.push_back(!b.available ? "no device" : r.support.at(b.name) ? "yes" : "no");
    ops.add(row);
  }
  ops.add_separator();
  ops.add({"total", fmt::format("{}", bound.nodes().size()), (total_exact ? "" : "~") + format_flops(total)});
  fmt::print("{}", ops.render());
  if (!total_exact) fmt::print("~ : some shapes stay symbolic; give --dim NAME=VALUE for an exact count\n");
  if (!o.device.empty()) print_placement(placement, o.device, o.optimized ? o.engine.precision : "fp32");
  if (report) print_compile_report(bound, *report, o.verbose);
  return kExitOk;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("inspect", "Show a model's opset, inputs/outputs, ops, parameters, FLOPs and backend support");
  cmd->add_option("model", o->model, "ONNX model file, or a language-model folder with config.json (docs/llm.md)")->required();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--optimized", o->optimized, "Show the graph after gpuopt's passes (constant and BatchNormalization folding, Identity/Dropout removal, Conv+Add+Relu fusion into FusedConv, GELU, attention, MatMul+bias into Gemm; with --device cuda and --precision fp16/bf16, the channels-last layout pass) and what the compiler did: per node its fusion, layout, precision and placement, and the static memory plan");
  cmd->add_flag("--verbose", o->verbose, "With --optimized: the memory plan's offset, size and lifetime of every tensor");
  add_precision_option(cmd, &o->engine.precision,
                       "With --optimized: the precision conversion the session runs (fp32, fp16, bf16; int8 for a model "
                       "with QuantizeLinear/DequantizeLinear nodes, as gpuopt quantize writes: with --device cuda, the "
                       "int8 GEMMs and convolutions and what their epilogues took over; a float model is first "
                       "calibrated on random inputs, as run --precision int8 does, with a warning; fp8 for a model "
                       "with Fp8Gemm nodes)");
  add_engine_flags(cmd, &o->engine, kMemoryLimitFlag | kKernelFlag);
  cmd->add_option("--batch", o->batch, "Value of the dynamic batch dim for FLOP counts (default 1)")->check(int_range(1, kMaxBatch));
  cmd->add_option("--dim", o->dims, "Bind another symbolic dim for FLOP counts: NAME=VALUE (repeatable)");
  add_device_option(cmd, &o->device,
                    "Show per op type how many nodes run on this backend (cpu: the fast CPU kernels, cpu-ref, cuda, "
                    "cuda:N) and how many fall back to the CPU reference");
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(30, setup);

}  // namespace
}  // namespace gpuopt::cli
