// profile's GPU kernels (CUPTI records) on synthetic records: each kernel goes to the run and the
// node whose host interval holds it, the per-name summary, the kernel tracks of the trace and
// the JSON. The CUPTI capture itself needs a GPU: scripts/gpu/profile_kernels.sh.
#include "profile/kernels.h"
#include "profile/trace.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gpuopt::profile {
namespace {

// Two runs of two nodes on the GPU, as tests/tune/profile_test.cpp's synthetic(true): run k
// starts at 2000 + 1000k; "add" holds [+10, +110], "mm" [+120, +820]; the run ends at +850.
ProfileResult two_runs() {
  ProfileResult r;
  r.model = "m.onnx";
  r.device = "cuda:0";
  r.precision = "fp16";
  r.spans.push_back({"import", "load", 1000, 50});
  r.nodes = {{"add", "Add", "", "float16", 1e6, 2.5e5}, {"mm", "MatMul", "", "float16", 1e6, 1e9}};
  for (int k = 0; k < 2; ++k) {
    ProfiledRun run;
    run.start_us = 2000 + 1000 * k;
    run.profile.nodes = {{"add", "Add", "cuda", 100, 10.0, run.start_us + 10, 0.0},
                         {"mm", "MatMul", "cuda", 700, 500.0, run.start_us + 120, 120.0}};
    run.end_us = run.start_us + 850;
    r.runs.push_back(run);
  }
  return r;
}

KernelRecord kernel(std::string name, double start, double dur, uint32_t stream = 7) {
  KernelRecord k;
  k.name = std::move(name);
  k.start_us = start;
  k.dur_us = dur;
  k.stream = stream;
  k.grid = {64, 1, 1};
  k.block = {256, 1, 1};
  return k;
}

// The records in no particular order, as CUPTI's buffers may hand them over.
std::vector<KernelRecord> records() {
  return {kernel("sm90_xmma_gemm_f16f16_f32", 3130, 480),      // run 2, mm
          kernel("vectorized_add<half>", 2030, 10),            // run 1, add
          kernel("sm90_xmma_gemm_f16f16_f32", 2130, 300),      // run 1, mm
          kernel("splitK_reduce", 2440, 150),                  // run 1, mm (second kernel)
          kernel("cast_f32_to_f16", 2004, 3),                  // run 1, before the first node: staging
          kernel("vectorized_add<half>", 3025, 12),            // run 2, add
          kernel("other_process_kernel", 9000, 5)};            // in no run: dropped
}

TEST(ProfileKernels, AttachedToRunAndNodeByHostInterval) {
  ProfileResult r = two_runs();
  attach_kernels(records(), &r);
  ASSERT_EQ(r.runs[0].kernels.size(), 4u);
  ASSERT_EQ(r.runs[1].kernels.size(), 2u);
  std::vector<std::pair<std::string, int>> got;
  for (const KernelRecord& k : r.runs[0].kernels) got.emplace_back(k.name, k.node);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{{"cast_f32_to_f16", -1},
                                                            {"vectorized_add<half>", 0},
                                                            {"sm90_xmma_gemm_f16f16_f32", 1},
                                                            {"splitK_reduce", 1}}));
  EXPECT_EQ(r.runs[1].kernels[0].node, 0);
  EXPECT_EQ(r.runs[1].kernels[1].node, 1);
  // Attaching again replaces, it does not add.
  attach_kernels(records(), &r);
  EXPECT_EQ(r.runs[0].kernels.size(), 4u);
}

TEST(ProfileKernels, NodesOutOfOrderAndKernelsJustOutside) {
  ProfileResult r = two_runs();
  std::swap(r.runs[0].profile.nodes[0], r.runs[0].profile.nodes[1]);  // mm listed before add
  attach_kernels({kernel("in_add", 2030, 10), kernel("in_mm", 2130, 300),
                  kernel("just_after_add", 2110.5, 1),   // midpoint 1 us past add's end: still add's
                  kernel("gap", 2114, 2)},              // midpoint 5 us from add, 5 us from mm: neither
                 &r);
  std::map<std::string, std::string> node;
  for (const KernelRecord& k : r.runs[0].kernels)
    node[k.name] = k.node < 0 ? "-" : r.runs[0].profile.nodes[static_cast<size_t>(k.node)].node;
  EXPECT_EQ(node, (std::map<std::string, std::string>{{"in_add", "add"}, {"in_mm", "mm"}, {"just_after_add", "add"}, {"gap", "-"}}));
}

TEST(ProfileKernels, SummaryByNameSlowestFirst) {
  ProfileResult r = two_runs();
  attach_kernels(records(), &r);
  double total = 0;
  const auto rows = summarize_kernels(r, 3, &total);
  EXPECT_DOUBLE_EQ(total, (480 + 10 + 300 + 150 + 3 + 12) / 2.0);
  ASSERT_EQ(rows.size(), 3u);  // top 3 of 4 names
  EXPECT_EQ(rows[0].name, "sm90_xmma_gemm_f16f16_f32");
  EXPECT_DOUBLE_EQ(rows[0].calls, 1);
  EXPECT_DOUBLE_EQ(rows[0].time_us, (480 + 300) / 2.0);
  EXPECT_NEAR(rows[0].share, 780.0 / 955.0, 1e-12);
  EXPECT_EQ(rows[0].node, "mm");
  EXPECT_EQ(rows[0].op, "MatMul");
  EXPECT_EQ(rows[0].nodes, 1);
  EXPECT_EQ(rows[1].name, "splitK_reduce");
  EXPECT_DOUBLE_EQ(rows[1].calls, 0.5);
  EXPECT_EQ(rows[2].name, "vectorized_add<half>");
  EXPECT_EQ(rows[2].node, "add");

  const Summary s = summarize(r, std::nullopt, 10);
  ASSERT_EQ(s.kernels.size(), 4u);
  // Per node: its kernels, slowest first, time per run.
  ASSERT_EQ(s.nodes[0].name, "mm");
  EXPECT_EQ(s.nodes[0].kernels, (std::vector<std::pair<std::string, double>>{{"sm90_xmma_gemm_f16f16_f32", 390},
                                                                              {"splitK_reduce", 75}}));
  EXPECT_EQ(s.nodes[1].kernels, (std::vector<std::pair<std::string, double>>{{"vectorized_add<half>", 11}}));
  EXPECT_EQ(s.kernels.back().name, "cast_f32_to_f16");
  EXPECT_TRUE(s.kernels.back().node.empty());  // between nodes
  r.kernels_recorded = true;
  const nlohmann::json j = summary_json(r, s);
  ASSERT_EQ(j["kernels"].size(), 4u);
  EXPECT_EQ(j["kernels"][0]["kernel"], "sm90_xmma_gemm_f16f16_f32");
  EXPECT_EQ(j["kernels"][0]["node"], "mm");
  EXPECT_TRUE(j["kernels"][3]["node"].is_null());
  EXPECT_EQ(j["nodes"][0]["kernels"][1]["kernel"], "splitK_reduce");
  EXPECT_DOUBLE_EQ(j["nodes"][0]["kernels"][1]["time_us"].get<double>(), 75);
  EXPECT_EQ(j["kernels_recorded"], true);
  EXPECT_DOUBLE_EQ(j["kernel_time_us"].get<double>(), 955.0 / 2);
  const std::string text = render_summary(r, s);
  EXPECT_NE(text.find("top 4 kernels (CUPTI)"), std::string::npos) << text;
  EXPECT_NE(text.find("mm (MatMul)"), std::string::npos) << text;
}

TEST(ProfileKernels, TraceHasAKernelTrackPerStreamUnderTheNodes) {
  ProfileResult r = two_runs();
  auto recs = records();
  recs.push_back(kernel("copy_stream_kernel", 2500, 20, /*stream=*/9));  // run 1, mm, another stream
  attach_kernels(recs, &r);
  const nlohmann::json t = profile_trace(r);
  std::map<int, std::string> tracks;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["tid"]] = e["args"]["name"];
  std::map<int, double> last;
  std::map<std::pair<int, std::string>, std::pair<double, double>> launch;  // (run, node) -> host slice
  std::map<std::pair<int, std::string>, double> gpu_node;                    // (run, node) -> GPU slice start
  std::vector<nlohmann::json> kernels;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int tid = e["tid"];
    if (last.count(tid)) {
      EXPECT_GE(e["ts"].get<double>(), last[tid]) << e.dump();
    }
    last[tid] = e["ts"];
    if (e["cat"] == "launch")
      launch[{e["args"]["run"], e["name"]}] = {e["ts"], e["ts"].get<double>() + e["dur"].get<double>()};
    if (e["cat"] == "kernel") gpu_node[{e["args"]["run"], e["name"]}] = e["ts"];
    if (e["cat"] == "cuda kernel") {
      EXPECT_NE(tracks[tid].find("GPU kernels (CUPTI)"), std::string::npos) << tracks[tid];
      EXPECT_NE(tracks[tid].find("stream " + std::to_string(e["args"]["stream"].get<int>())), std::string::npos);
      kernels.push_back(e);
    }
  }
  ASSERT_EQ(kernels.size(), 7u);  // every kernel of the two runs once; the stray one is not there
  std::set<std::string> kernel_tracks;
  for (const auto& [tid, name] : tracks)
    if (name.find("GPU kernels") != std::string::npos) kernel_tracks.insert(name);
  EXPECT_EQ(kernel_tracks.size(), 2u);  // streams 7 and 9
  for (const auto& k : kernels) {
    if (k["args"]["node"].is_null()) {
      EXPECT_EQ(k["name"], "cast_f32_to_f16");
      continue;
    }
    // Inside the host interval of the node that launched it, on the trace's clock.
    const auto [a, b] = launch.at({k["args"]["run"], k["args"]["node"]});
    EXPECT_GE(k["ts"].get<double>(), a) << k.dump();
    EXPECT_LE(k["ts"].get<double>() + k["dur"].get<double>(), b) << k.dump();
    EXPECT_EQ(k["args"]["grid"], nlohmann::json({64, 1, 1}));
    EXPECT_EQ(k["args"]["op"], k["args"]["node"] == "mm" ? "MatMul" : "Add");
  }
  // The node track is lined up with the kernels: the median gap between each node's event start
  // and its first kernel is 0 (run 1: add +20 and mm +10 -> median +20 of two, i.e. the upper).
  const double origin = 1000;
  EXPECT_NEAR(gpu_node.at({1, "add"}), 2030 - origin, 1e-9);
  EXPECT_NEAR(gpu_node.at({2, "mm"}) - gpu_node.at({2, "add"}), 120, 1e-9);
}

TEST(ProfileKernels, Demangles) {
  EXPECT_EQ(demangle("_Z6squarePfi"), "square(float*, int)");
  EXPECT_EQ(demangle("sm90_xmma_gemm_f16f16_f32"), "sm90_xmma_gemm_f16f16_f32");
  EXPECT_EQ(demangle(nullptr), "");
}

}  // namespace
}  // namespace gpuopt::profile
