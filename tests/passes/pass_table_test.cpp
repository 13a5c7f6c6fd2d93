// The pass pipeline is one table (passes/pipeline.h): each switchable pass names a fusion of the
// fusion table, every fusion of a session's pipeline has a pass, and run_session_passes reports
// the passes it ran, which follow the session's settings.
#include "gpuopt/kernel_settings.h"
#include "ir/graph.h"
#include "passes/fusions.h"
#include "passes/pipeline.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

namespace gpuopt {
namespace {

TEST(PassTable, SwitchesAreFusionNamesAndEveryFusionHasAPass) {
  std::set<std::string_view> used;
  for (const PassEntry& e : pass_table()) {
    ASSERT_FALSE(e.name.empty());
    ASSERT_NE(e.run, nullptr) << e.name;
    if (e.fusion.empty()) continue;
    EXPECT_TRUE(is_fusion_name(e.fusion)) << e.name << ": '" << e.fusion << "' is not in passes/fusions.cpp";
    used.insert(e.fusion);
  }
  // The fp8_* switches belong to the fp8 rewrite of `gpuopt run --precision fp8` (quant/fp8.cpp).
  for (const FusionInfo& f : fusion_table())
    if (f.name.rfind("fp8_", 0) != 0) {
      EXPECT_TRUE(used.count(f.name)) << f.name << " turns off no pass of the table";
    }
}

// docs/engine.md's pass list is the table: each row "| `name` | `switch` or - | group |", in order.
TEST(PassTable, EngineDocListsExactlyTheTable) {
  std::ifstream f(std::string(GPUOPT_SOURCE_DIR) + "/docs/engine.md");
  ASSERT_TRUE(f) << "docs/engine.md";
  std::vector<std::string> doc, table;
  std::string line;
  bool in = false;
  while (std::getline(f, line)) {
    if (line.rfind("<!-- pass-table", 0) == 0) in = true;
    else if (line.rfind("<!-- /pass-table", 0) == 0) in = false;
    else if (in && line.rfind("| `", 0) == 0) doc.push_back(line);
  }
  for (const PassEntry& e : pass_table()) {
    if (e.name == "shapes") continue;
    const char* group = e.group == PassGroup::kQuantized ? "quantized" : e.group == PassGroup::kDefault ? "default" : "device";
    const std::string sw = e.fusion.empty() ? std::string("-") : fmt::format("`{}`", e.fusion);
    table.push_back(fmt::format("| `{}` | {} | {} |", e.name, sw, group));
  }
  EXPECT_EQ(doc, table);
}

// y = gelu(x @ W + B), GELU written op by op: x * 0.5 * (1 + erf(x / sqrt(2))).
Graph mlp() {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 4});
  std::vector<float> w(12, 0.5f), b(3, 0.25f);
  ValueId mm = g.add_node(Op::MatMul, "mm", {x, g.add_constant("W", Tensor::from_vector(DType::F32, {4, 3}, w))}, 1)[0];
  ValueId h = g.add_node(Op::Add, "add", {mm, g.add_constant("B", Tensor::from_vector(DType::F32, {3}, b))}, 1)[0];
  ValueId d = g.add_node(Op::Div, "div", {h, g.add_constant("sqrt2", Tensor::scalar_f32(1.4142135f))}, 1)[0];
  ValueId e = g.add_node(Op::Erf, "erf", {d}, 1)[0];
  ValueId p = g.add_node(Op::Add, "plus1", {e, g.add_constant("one", Tensor::scalar_f32(1.0f))}, 1)[0];
  ValueId m = g.add_node(Op::Mul, "mul", {h, p}, 1)[0];
  g.mark_output(g.add_node(Op::Mul, "half", {m, g.add_constant("half", Tensor::scalar_f32(0.5f))}, 1)[0]);
  EXPECT_TRUE(g.infer_shapes().ok());
  return g;
}

std::set<std::string> ran_names(const std::vector<PassRecord>& ran) {
  std::set<std::string> s;
  for (const PassRecord& r : ran) s.insert(r.name);
  return s;
}

TEST(PassTable, RecordsThePassesItRanUnderTheSessionSettings) {
  Graph on = mlp(), off = mlp();
  std::vector<PassRecord> ran_on, ran_off;
  KernelSettings all;
  ASSERT_TRUE(run_session_passes(&on, "cpu", "fp32", true, all, &ran_on).ok());
  KernelSettings some;
  ASSERT_TRUE(some.set("GPUOPT_DISABLE_FUSION", "gelu,matmul_bias").ok());
  ASSERT_TRUE(run_session_passes(&off, "cpu", "fp32", true, some, &ran_off).ok());
  const auto a = ran_names(ran_on), b = ran_names(ran_off);
  EXPECT_TRUE(a.count("fuse_gelu") && a.count("fuse_matmul_bias"));
  EXPECT_FALSE(b.count("fuse_gelu") || b.count("fuse_matmul_bias"));
  EXPECT_TRUE(b.count("fold_constants") && b.count("fuse_attention"));
  EXPECT_FALSE(a.count("layout_nhwc") || a.count("convert_precision"));  // CPU fp32: neither
  for (const PassRecord& r : ran_on) {
    if (r.name == "fuse_gelu") {
      EXPECT_EQ(r.stats.removed, 4) << "Div, Erf, Add, Mul, Mul into one Gelu";
    }
    if (r.name == "fuse_matmul_bias") {
      EXPECT_GE(r.stats.removed, 1);
    }
  }
  // Gemm + Gelu then became one FusedGemm (the activation in the GEMM's epilogue).
  EXPECT_TRUE(a.count("fuse_gemm_activation"));
  ASSERT_EQ(on.nodes().size(), 1u);
  EXPECT_EQ(on.nodes()[0].op_type, "FusedGemm");
  EXPECT_EQ(on.nodes()[0].attr_s("activation", ""), "Gelu");
  for (const Node& n : off.nodes()) EXPECT_TRUE(n.op_type != "Gelu" && n.op_type != "Gemm") << n.op_type;
}

TEST(PassTable, DevicePassesFollowDeviceAndPrecision) {
  Graph g = mlp();
  std::vector<PassRecord> ran;
  ASSERT_TRUE(run_session_passes(&g, "cuda", "fp16", true, KernelSettings{}, &ran).ok());
  EXPECT_TRUE(ran_names(ran).count("convert_precision"));
  Graph unopt = mlp();
  std::vector<PassRecord> only;
  ASSERT_TRUE(run_session_passes(&unopt, "cpu", "bf16", false, KernelSettings{}, &only).ok());
  ASSERT_EQ(only.size(), 1u);  // without optimize: the precision conversion alone
  EXPECT_EQ(only[0].name, "convert_precision");
  Graph bad = mlp();
  const Status st = run_session_passes(&bad, "cpu", "int4", true, KernelSettings{});
  EXPECT_NE(st.message().find("precision 'int4' is not one of fp32, fp16, bf16, int8, fp8"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace gpuopt
