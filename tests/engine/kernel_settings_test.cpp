// KernelSettings (gpuopt/kernel_settings.h): parsed and validated in one place, the environment
// supplying defaults only, carried per session — two sessions of one process run different pass
// pipelines and memory plans and get different plan-cache keys.
#include "backends/plan_cache.h"
#include "gpuopt/kernel_settings.h"
#include "gpuopt/session.h"
#include "ir/graph.h"
#include "runtime/plan_key.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gpuopt {
namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(KernelSettings, DefaultsComeFromTheEnvironment) {
  auto plain = KernelSettings::from_env();
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(*plain, KernelSettings{});
  ScopedEnv a("GPUOPT_ATTENTION_KERNEL", "cudnn");
  ScopedEnv b("GPUOPT_MATMUL_CANDIDATES", "32");
  ScopedEnv c("GPUOPT_DISABLE_FUSION", "gelu,attention");
  auto env = KernelSettings::from_env();
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->attention_kernel, KernelSettings::AttentionKernel::kCudnn);
  EXPECT_EQ(env->matmul_candidates, 32);
  EXPECT_EQ(env->disable_fusion, "gelu,attention");
  EXPECT_EQ(env->fa_warps, 0);  // untouched: the built-in default
  // Given settings win over the environment.
  KernelSettings mine;
  auto given = KernelSettings::or_env(mine);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->attention_kernel, KernelSettings::AttentionKernel::kAuto);
}

TEST(KernelSettings, BadValuesNameTheVariableAndTheAllowedValues) {
  struct Case {
    const char* name;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"GPUOPT_FA_WARPS", "6", "GPUOPT_FA_WARPS='6': expected auto, 4 or 8"},
      {"GPUOPT_ATTENTION_KERNEL", "flash", "GPUOPT_ATTENTION_KERNEL='flash': expected auto, cudnn, fa, wmma or scalar"},
      {"GPUOPT_MATMUL_AUTOTUNE", "yes", "GPUOPT_MATMUL_AUTOTUNE='yes': expected 0 or 1"},
      {"GPUOPT_MATMUL_CANDIDATES", "65", "GPUOPT_MATMUL_CANDIDATES='65': expected a number from 1 to 64"},
      {"GPUOPT_MEMORY_PLAN", "arena", "GPUOPT_MEMORY_PLAN='arena': expected static or pool"},
      {"GPUOPT_DISABLE_FUSION", "nosuch", "GPUOPT_DISABLE_FUSION: unknown fusion 'nosuch'"},
  };
  for (const Case& c : cases) {
    KernelSettings s;
    const Status st = s.set(c.name, c.value);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_EQ(s, KernelSettings{}) << c.name << ": a refused value changes nothing";
    ScopedEnv e(c.name, c.value);  // the same line from the environment, and from a session load
    auto env = KernelSettings::from_env();
    ASSERT_FALSE(env.ok()) << c.name;
    EXPECT_NE(env.status().message().find(c.message), std::string::npos) << env.status().message();
  }
  KernelSettings s;
  EXPECT_NE(s.set("GPUOPT_NO_SUCH", "1").message().find("not a kernel setting"), std::string::npos);
}

TEST(KernelSettings, EveryValueRoundTripsAndChangesTheKey) {
  const KernelSettings base;
  ASSERT_EQ(KernelSettings::names().size(), 19u);
  for (std::string_view name : KernelSettings::names()) {
    KernelSettings s;
    ASSERT_TRUE(s.set(name, base.get(name)).ok() || base.get(name).empty()) << name;  // the default's own text
    // One other value per setting: set, read back, and a key of its own.
    const std::string other = name == "GPUOPT_MATMUL_CANDIDATES" ? "3"
                              : name == "GPUOPT_DISABLE_FUSION"  ? "gelu"
                              : name == "GPUOPT_FA_WARPS"        ? "8"
                              : name == "GPUOPT_MEMORY_PLAN"     ? "pool"
                                                                  : "";
    std::string value = other;
    if (value.empty()) {  // the first allowed text other than the default, from the error's list
      const Status st = s.set(name, "?");
      ASSERT_FALSE(st.ok());
      const std::string msg = st.message();
      const std::string list = msg.substr(msg.find("expected ") + 9);
      for (size_t b = 0; b < list.size();) {
        size_t e = list.find_first_of(", ", b);
        const std::string item = list.substr(b, e - b);
        if (item != "or" && !item.empty() && item != base.get(name)) {
          value = item;
          break;
        }
        b = e == std::string::npos ? list.size() : e + 1;
      }
    }
    ASSERT_FALSE(value.empty()) << name;
    ASSERT_TRUE(s.set(name, value).ok()) << name << "=" << value;
    EXPECT_EQ(s.get(name), value) << name;
    EXPECT_NE(s, base) << name;
    EXPECT_NE(s.key(), base.key()) << name;
    EXPECT_NE(plan_cache_settings("fp16", true, s), plan_cache_settings("fp16", true, base)) << name;
  }
}

TEST(KernelSettings, PlanCacheHashCoversTheSettings) {
  const std::string path = (std::filesystem::temp_directory_path() / "gpuopt_kernel_settings_model.onnx").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << "not really a model, only bytes to hash";
  }
  KernelSettings a, b;
  b.attention_kernel = KernelSettings::AttentionKernel::kScalar;
  auto ha = model_hash(path, plan_cache_settings("fp16", true, a));
  auto ha2 = model_hash(path, plan_cache_settings("fp16", true, a));
  auto hb = model_hash(path, plan_cache_settings("fp16", true, b));
  std::filesystem::remove(path);
  ASSERT_TRUE(ha.ok() && ha2.ok() && hb.ok());
  EXPECT_EQ(*ha, *ha2);
  EXPECT_NE(*ha, *hb);
}

// y = x @ W + B: fuse_matmul_bias makes it one Gemm unless the session turns the fusion off.
Graph matmul_add() {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {2, 4});
  std::vector<float> w(12), bias(3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f - 1.0f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) + 0.5f;
  ValueId wv = g.add_constant("W", Tensor::from_vector(DType::F32, {4, 3}, w));
  ValueId bv = g.add_constant("B", Tensor::from_vector(DType::F32, {3}, bias));
  ValueId mm = g.add_node(Op::MatMul, "mm", {x, wv}, 1)[0];
  g.mark_output(g.add_node(Op::Add, "add", {mm, bv}, 1)[0]);
  EXPECT_TRUE(g.infer_shapes().ok());
  return g;
}

int count_op(const Session& s, const std::string& op) {
  int n = 0;
  for (const Node& node : s.graph().nodes()) n += node.op_type == op;
  return n;
}

TEST(KernelSettings, TwoSessionsOfOneProcessRunDifferentPasses) {
  SessionOptions fused, unfused;
  fused.kernels = KernelSettings{};
  unfused.kernels = KernelSettings{};
  unfused.kernels->disable_fusion = "matmul_bias";
  // The environment asks for the opposite of the first session: given settings win.
  ScopedEnv env("GPUOPT_DISABLE_FUSION", "all");
  auto a = Session::from_graph(matmul_add(), fused);
  auto b = Session::from_graph(matmul_add(), unfused);
  auto c = Session::from_graph(matmul_add());  // no settings: the environment's
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(count_op(**a, "Gemm"), 1);
  EXPECT_EQ(count_op(**a, "MatMul"), 0);
  EXPECT_EQ(count_op(**b, "Gemm"), 0);
  EXPECT_EQ(count_op(**b, "MatMul"), 1);
  EXPECT_EQ(count_op(**c, "Gemm"), 0);
  // Same numbers either way (numpy-free oracle: the sums written out).
  const Tensor x = Tensor::from_vector(DType::F32, {2, 4}, std::vector<float>{1, 2, 3, 4, -1, 0, 0.5f, 2});
  auto ya = (*a)->run({{"x", x}});
  auto yb = (*b)->run({{"x", x}});
  ASSERT_TRUE(ya.ok() && yb.ok());
  const Tensor& ta = ya->at(0).second;
  const Tensor& tb = yb->at(0).second;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < 3; ++j) {
      double want = static_cast<double>(j) + 0.5;
      for (int64_t i = 0; i < 4; ++i) want += x.get_f64(r * 4 + i) * (static_cast<double>(i * 3 + j) * 0.25 - 1.0);
      EXPECT_NEAR(ta.get_f64(r * 3 + j), want, 1e-5);
      EXPECT_NEAR(tb.get_f64(r * 3 + j), want, 1e-5);
    }
}

TEST(KernelSettings, TwoSessionsOfOneProcessUseTheirOwnMemoryPlan) {
  // MatMul's [2,3] f32 result is the one intermediate: the static plan holds it in a 256-byte
  // granule of its arena (and the 24-byte output beside it), the pool allocates 24 bytes.
  const Tensor x = Tensor::from_vector(DType::F32, {2, 4}, std::vector<float>{1, 2, 3, 4, -1, 0, 0.5f, 2});
  int64_t peak[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    SessionOptions o;
    o.kernels = KernelSettings{};
    o.kernels->disable_fusion = "matmul_bias";
    o.kernels->memory_plan = i == 0 ? KernelSettings::MemoryPlan::kStatic : KernelSettings::MemoryPlan::kPool;
    auto s = Session::from_graph(matmul_add(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    RunProfile p;
    ASSERT_TRUE((*s)->run({{"x", x}}, &p).ok());
    peak[i] = p.peak_intermediate_bytes;
  }
  EXPECT_EQ(peak[0], 256 + 24);
  EXPECT_GT(peak[1], 0);
  EXPECT_LT(peak[1], peak[0]);
}

TEST(KernelSettings, BadEnvironmentRefusesASessionWithoutSettingsOnly) {
  ScopedEnv env("GPUOPT_POOL_KERNEL", "fast");
  auto refused = Session::from_graph(matmul_add());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("GPUOPT_POOL_KERNEL='fast': expected ours or cudnn"), std::string::npos)
      << refused.status().message();
  SessionOptions own;
  own.kernels = KernelSettings{};
  EXPECT_TRUE(Session::from_graph(matmul_add(), own).ok());
}

}  // namespace
}  // namespace gpuopt
