// The pass pipeline as one table (pipeline.cpp): each pass is one entry {name, fusion switch,
// group, applies(ctx), run(graph, ctx)}, run in table order. run_session_passes runs the whole
// table with a session's settings (gpuopt/kernel_settings.h: fusion switches, GPUOPT_INT8_CONV),
// run_default_passes the kDefault group; tests and docs read pass_table().
//
//   GPUOPT_ASSIGN_OR_RETURN(KernelSettings ks, KernelSettings::from_env());
//   std::vector<PassRecord> ran;
//   GPUOPT_RETURN_IF_ERROR(run_session_passes(&graph, device, "fp16", true, ks, &ran));
//   for (const PassRecord& r : ran) fmt::print("{}: -{} nodes\n", r.name, r.stats.removed);
//
// Adding a pass: its function in src/passes/<pass>.cpp and one entry in pass_table() (with a new
// fusion name in fusions.cpp when it can be switched off).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/kernel_settings.h"
#include "passes/passes.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

class Graph;

// What a pass's applies() and run() read.
struct PassContext {
  Device device;
  std::string_view precision;  // as the session asked: fp32, fp16, bf16, int8, fp8
  bool optimize = true;
  FusionSwitches sw;
  KernelSettings settings;
  bool cuda() const { return device.is_cuda(); }
  // --precision int8 on the GPU with the QDQ folding on: the Int8Gemm/Int8Conv passes run.
  bool int8_gpu() const { return precision == "int8" && cuda() && optimize && sw.enabled("qdq"); }
  // The float compute precision: int8 and fp8 run their float rest in fp16 on the GPU, f32 elsewhere.
  std::string_view compute_precision() const;
  bool low() const { return compute_precision() == "fp16" || compute_precision() == "bf16"; }
};

// kQuantized before the default passes (QDQ pairs still visible), kDefault the device-independent
// passes run_default_passes runs, kDevice after them (precision, layout, the int8 epilogues).
enum class PassGroup : uint8_t { kQuantized, kDefault, kDevice };

struct PassEntry {
  std::string_view name;    // in logs and PassRecord
  std::string_view fusion;  // the GPUOPT_DISABLE_FUSION name that turns it off; "" = none
  PassGroup group;
  bool (*applies)(const PassContext&);  // besides its switch; nullptr = always
  Result<PassStats> (*run)(Graph*, const PassContext&);
};
std::span<const PassEntry> pass_table();

// One pass that ran, and what it changed.
struct PassRecord {
  std::string name;
  PassStats stats;
};

// What Session::init runs; passes.h's run_session_passes(g, device, precision, optimize) is this
// with KernelSettings::from_env(). `ran`, when given, receives each pass that ran, in order.
Status run_session_passes(Graph* g, const Device& device, std::string_view precision, bool optimize,
                          const KernelSettings& settings, std::vector<PassRecord>* ran = nullptr);

}  // namespace gpuopt
