// profile's summary and trace on a synthetic run: shares, roofline class, bench ceilings, and
// the trace's structure (every node once per run, timestamps in order per track).
#include "profile/profile.h"
#include "profile/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace gpuopt::profile {
namespace {

ProfileResult synthetic(bool gpu) {
  ProfileResult r;
  r.model = "m.onnx";
  r.device = gpu ? "cuda" : "cpu";
  r.precision = "fp16";
  r.spans.push_back({"import", "load", 1000, 50});
  // A memory-heavy Add (1 MB moved, 0.25 MFLOP) and a compute-heavy MatMul (1 GFLOP, 1 MB).
  r.nodes = {{"add", "Add", "", "float16", 1e6, 2.5e5}, {"mm", "MatMul", "", "float16", 1e6, 1e9}};
  for (int k = 0; k < 2; ++k) {
    ProfiledRun run;
    run.start_us = 2000 + 1000 * k;
    run.profile.nodes = {{"add", "Add", r.device, 100, gpu ? 10.0 : 0.0, run.start_us + 10, gpu ? 0.0 : -1.0},
                         {"mm", "MatMul", r.device, 700, gpu ? 500.0 : 0.0, run.start_us + 120, gpu ? 120.0 : -1.0}};
    run.end_us = run.start_us + 850;
    r.runs.push_back(run);
  }
  return r;
}

TEST(ProfileSummary, SharesGapsAndRoofline) {
  Ceilings c;
  c.bandwidth_GBps = 1000;  // ridge at 100 FLOP/byte for a 100 TFLOP/s f16 peak
  c.peak_TFLOPs["f16"] = 100;
  const Summary s = summarize(synthetic(true), c, 1);
  EXPECT_EQ(s.runs, 2);
  EXPECT_DOUBLE_EQ(s.run_us, 850);
  EXPECT_DOUBLE_EQ(s.node_wall_us, 800);
  EXPECT_NEAR(s.host_gap_share, 50.0 / 850.0, 1e-12);
  EXPECT_NEAR(s.device_busy_share, 510.0 / 850.0, 1e-12);
  ASSERT_EQ(s.top.size(), 1u);
  EXPECT_EQ(s.top[0].name, "mm");  // slowest first, on device time
  ASSERT_EQ(s.nodes.size(), 2u);
  const NodeRow& mm = s.nodes[0];
  const NodeRow& add = s.nodes[1];
  EXPECT_EQ(mm.bound, "compute");  // 1000 FLOP/byte > ridge 100
  EXPECT_NEAR(mm.tflops, 1e9 / 500e-6 / 1e12, 1e-9);
  EXPECT_NEAR(mm.roof_pct, 100.0 * 2.0 / 100.0, 1e-9);
  EXPECT_EQ(add.bound, "memory");  // 0.25 FLOP/byte
  EXPECT_NEAR(add.gbps, 1e6 / 10e-6 / 1e9, 1e-9);
  EXPECT_NEAR(add.roof_pct, 100.0 * 100.0 / 1000.0, 1e-9);
  EXPECT_NEAR(mm.share + add.share, 1.0, 1e-12);
}

TEST(ProfileSummary, NoCeilingsNoClass) {
  const Summary s = summarize(synthetic(false), std::nullopt, 10);
  EXPECT_LT(s.device_busy_share, 0);
  for (const NodeRow& n : s.nodes) EXPECT_TRUE(n.bound.empty());
}

TEST(ProfileCeilings, ReadsBenchJson) {
  const auto path = std::filesystem::temp_directory_path() / "gpuopt_ceilings_test.json";
  std::ofstream(path) << R"({"device": {"name": "Test GPU"}, "sections": [
    {"name": "memory", "results": [{"test": "d2d_copy_kernel", "unit": "GB/s", "value": 3000},
                                   {"test": "h2d_pinned", "unit": "GB/s", "value": 50},
                                   {"test": "read_kernel", "unit": "GB/s", "value": 3500}]},
    {"name": "compute", "results": [{"test": "gemm_f16", "unit": "TFLOP/s", "value": 700},
                                    {"test": "gemm_f16", "unit": "TFLOP/s", "value": 650},
                                    {"test": "gemm_f32", "unit": "TFLOP/s", "value": 50}]}]})";
  auto c = read_ceilings(path.string());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->device, "Test GPU");
  EXPECT_DOUBLE_EQ(c->bandwidth_GBps, 3500);  // transfers over the link are not device memory
  EXPECT_DOUBLE_EQ(c->peak_for("float16"), 700);
  EXPECT_DOUBLE_EQ(c->peak_for("bfloat16"), 50);  // no bf16 row: f32's
  std::ofstream(path) << "{\"sections\": []}";
  auto bad = read_ceilings(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no memory bandwidth or GEMM rows"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(ProfileTrace, EveryNodeOncePerRunInOrder) {
  const nlohmann::json t = profile_trace(synthetic(true));
  std::map<std::pair<int, int>, double> last;
  std::map<std::string, int> host_nodes, gpu_nodes;
  std::map<int, std::string> tracks;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["tid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    const auto key = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
    const double ts = e["ts"];
    EXPECT_GE(e["dur"].get<double>(), 0);
    if (last.count(key)) {
      EXPECT_GE(ts, last[key]) << e.dump();
    }
    last[key] = ts;
    if (e["cat"] == "launch") ++host_nodes[e["name"]];
    if (e["cat"] == "kernel") {
      ++gpu_nodes[e["name"]];
      EXPECT_EQ(e["args"]["flops"], e["name"] == "mm" ? 1e9 : 2.5e5);
    }
  }
  EXPECT_EQ(tracks.size(), 2u);
  EXPECT_EQ(host_nodes, (std::map<std::string, int>{{"add", 2}, {"mm", 2}}));
  EXPECT_EQ(gpu_nodes, host_nodes);
}

}  // namespace
}  // namespace gpuopt::profile
