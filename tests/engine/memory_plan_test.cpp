// The static memory plan (backends/memory_plan.h) against a brute-force check written here: no
// two tensors whose lifetimes overlap share a byte unless one is a view of the other, every
// offset aligned, the arena no larger than the sum of the buffers and no smaller than the most
// bytes live at one step. Lifetimes and view chains are recomputed here from the graph.
#include "backends/backend.h"
#include "ir/graph.h"
#include "backends/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

bool view_type(const Node& n) {
  return n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze" ||
         n.op_type == "Identity";
}

// The value whose storage `v` uses: up through view nodes.
ValueId storage_root(const Graph& g, ValueId v) {
  while (true) {
    const Value& val = g.value(v);
    if (val.producer < 0) return v;
    const Node& n = g.nodes()[static_cast<size_t>(val.producer)];
    if (!view_type(n) || n.inputs.empty() || n.inputs[0] == kNoValue) return v;
    v = n.inputs[0];
  }
}

// Checks `plan` for `g` and `bytes`; returns the number of values in the arena.
size_t check_plan(const Graph& g, const std::vector<int64_t>& bytes, const MemoryPlan& plan) {
  const size_t nv = g.values().size();
  // Lifetime of each value's storage root: its producer to the last reader of any value sharing it.
  std::vector<int32_t> first(nv, -1), last(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    const auto r = static_cast<size_t>(storage_root(g, static_cast<ValueId>(v)));
    if (first[r] < 0) first[r] = last[r] = g.values()[r].producer;
  }
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (ValueId in : g.nodes()[n].inputs)
      if (in != kNoValue) {
        const auto r = static_cast<size_t>(storage_root(g, in));
        last[r] = std::max(last[r], static_cast<int32_t>(n));
      }
  std::vector<size_t> in_arena;
  size_t sum = 0;
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = g.values()[v];
    if (!plan.in_arena(static_cast<ValueId>(v))) continue;
    EXPECT_FALSE(val.is_graph_input || val.is_graph_output || val.constant) << val.name << " is not an activation";
    EXPECT_GE(bytes[v], 0) << val.name;
    EXPECT_EQ(plan.offset[v] % 256, 0) << val.name;
    EXPECT_LE(static_cast<size_t>(plan.offset[v]) + static_cast<size_t>(bytes[v]), plan.arena_bytes) << val.name;
    EXPECT_GE(plan.capacity(static_cast<ValueId>(v)), static_cast<size_t>(bytes[v])) << val.name;
    in_arena.push_back(v);
    if (storage_root(g, static_cast<ValueId>(v)) == static_cast<ValueId>(v)) sum += (static_cast<size_t>(bytes[v]) + 255) / 256 * 256;
  }
  for (ValueId o : g.outputs())  // nothing sharing storage with a result is in the arena
    EXPECT_FALSE(plan.in_arena(storage_root(g, o))) << g.value(o).name;
  for (size_t i = 0; i < in_arena.size(); ++i)
    for (size_t j = i + 1; j < in_arena.size(); ++j) {
      const size_t a = in_arena[i], b = in_arena[j];
      const auto ra = static_cast<size_t>(storage_root(g, static_cast<ValueId>(a)));
      const auto rb = static_cast<size_t>(storage_root(g, static_cast<ValueId>(b)));
      if (ra == rb) {
        EXPECT_EQ(plan.offset[a], plan.offset[b]) << "a view and its input at different offsets";
        continue;
      }
      const bool time = first[ra] <= last[rb] && first[rb] <= last[ra];
      const auto ab = static_cast<size_t>(plan.offset[a]), bb = static_cast<size_t>(plan.offset[b]);
      const bool space = ab < bb + static_cast<size_t>(bytes[b]) && bb < ab + static_cast<size_t>(bytes[a]);
      EXPECT_FALSE(time && space) << g.values()[a].name << " [" << first[ra] << "," << last[ra] << "] @" << ab << "+"
                                  << bytes[a] << " overlaps " << g.values()[b].name << " [" << first[rb] << ","
                                  << last[rb] << "] @" << bb << "+" << bytes[b];
    }
  // Bounds: no larger than every buffer on its own, no smaller than the bytes live at once.
  EXPECT_LE(plan.arena_bytes, sum);
  EXPECT_EQ(plan.naive_bytes, sum);
  size_t most = 0;
  for (size_t s = 0; s < g.nodes().size(); ++s) {
    size_t live = 0;
    for (size_t v : in_arena)
      if (storage_root(g, static_cast<ValueId>(v)) == static_cast<ValueId>(v) && first[v] <= static_cast<int32_t>(s) &&
          static_cast<int32_t>(s) <= last[v])
        live += (static_cast<size_t>(bytes[v]) + 255) / 256 * 256;
    most = std::max(most, live);
  }
  EXPECT_GE(plan.arena_bytes, most);
  EXPECT_EQ(plan.peak_live_bytes, most);
  return in_arena.size();
}

std::vector<int64_t> static_bytes(const Graph& g) {
  std::vector<std::pair<DType, Shape>> in;
  for (ValueId v : g.inputs()) in.emplace_back(g.value(v).info.dtype, g.value(v).info.shape);
  return value_bytes_for_inputs(g, in);
}

TEST(MemoryPlan, ChainPingPongsBetweenTwoBuffers) {
  Graph g;
  ValueId v = g.add_input("x", DType::F32, {1024});
  for (int i = 0; i < 6; ++i) v = g.add_node(i % 2 ? Op::Relu : Op::Neg, fmt::format("n{}", i), {v}, 1)[0];
  g.mark_output(v);
  ASSERT_TRUE(g.infer_shapes().ok());
  const auto bytes = static_bytes(g);
  const MemoryPlan plan = plan_memory(g, bytes, {});
  EXPECT_EQ(check_plan(g, bytes, plan), 5u);  // the output is outside
  EXPECT_EQ(plan.arena_bytes, 2u * 4096);
  EXPECT_EQ(plan.naive_bytes, 5u * 4096);
}

TEST(MemoryPlan, SkipConnectionKeepsItsSourceAlive) {
  // a feeds the Add at the end: a's bytes are never reused in between.
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {256});
  ValueId a = g.add_node(Op::Relu, "a", {x}, 1)[0];
  ValueId b = g.add_node(Op::Neg, "b", {a}, 1)[0];
  ValueId c = g.add_node(Op::Relu, "c", {b}, 1)[0];
  ValueId d = g.add_node(Op::Neg, "d", {c}, 1)[0];
  ValueId y = g.add_node(Op::Add, "y", {a, d}, 1)[0];
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  const auto bytes = static_bytes(g);
  const MemoryPlan plan = plan_memory(g, bytes, {});
  EXPECT_EQ(check_plan(g, bytes, plan), 4u);
  EXPECT_EQ(plan.arena_bytes, 3u * 1024);  // a + two ping-pong buffers
}

TEST(MemoryPlan, ViewsShareTheirInputsBytes) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {4, 64});
  ValueId a = g.add_node(Op::Relu, "a", {x}, 1)[0];
  ValueId shape = g.add_constant("shape", Tensor::from_vector(DType::I64, {1}, std::vector<int64_t>{256}));
  ValueId r = g.add_node(Op::Reshape, "r", {a, shape}, 1)[0];
  ValueId b = g.add_node(Op::Neg, "b", {r}, 1)[0];
  ValueId c = g.add_node(Op::Relu, "c", {b}, 1)[0];
  ValueId y = g.add_node(Op::Add, "y", {c, r}, 1)[0];  // r (so a's bytes) read last here
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  const auto bytes = static_bytes(g);
  const MemoryPlan plan = plan_memory(g, bytes, {});
  EXPECT_EQ(check_plan(g, bytes, plan), 4u);
  ASSERT_TRUE(plan.in_arena(r));
  EXPECT_EQ(plan.offset[static_cast<size_t>(r)], plan.offset[static_cast<size_t>(a)]);
  EXPECT_EQ(plan.buffers.size(), 3u);  // a (with r), b, c
  EXPECT_EQ(plan.arena_bytes, 3u * 1024);  // a lives to the end, b and c overlap at c
}

TEST(MemoryPlan, ReshapeOfAComputedShapeIsSized) {
  // Reshape(x, Concat(Shape(x)[0], [-1])) with a dynamic batch: sized for the run's inputs.
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 4, 8});
  ValueId a = g.add_node(Op::Relu, "a", {x}, 1)[0];
  ValueId s = g.add_node(Op::Shape, "s", {a}, 1)[0];
  ValueId idx = g.add_constant("i0", Tensor::from_vector(DType::I64, {1}, std::vector<int64_t>{0}));
  ValueId n = g.add_node(Op::Gather, "n", {s, idx}, 1)[0];
  ValueId m1 = g.add_constant("m1", Tensor::from_vector(DType::I64, {1}, std::vector<int64_t>{-1}));
  ValueId shape = g.add_node(Op::Concat, "cat", {n, m1}, 1, {{"axis", int_attr(0)}})[0];
  ValueId r = g.add_node(Op::Reshape, "r", {a, shape}, 1)[0];
  ValueId y = g.add_node(Op::Relu, "y", {r}, 1)[0];
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  const auto bytes = value_bytes_for_inputs(g, {{DType::F32, {3, 4, 8}}});
  EXPECT_EQ(bytes[static_cast<size_t>(a)], 3 * 4 * 8 * 4);
  EXPECT_EQ(bytes[static_cast<size_t>(shape)], 2 * 8);
  EXPECT_EQ(bytes[static_cast<size_t>(r)], 3 * 4 * 8 * 4);
  EXPECT_EQ(bytes[static_cast<size_t>(y)], 3 * 4 * 8 * 4);
  const MemoryPlan plan = plan_memory(g, bytes, {});
  check_plan(g, bytes, plan);
  EXPECT_TRUE(plan.in_arena(r));
}

TEST(MemoryPlan, PlannableLeavesOtherNodesOutside) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {64});
  ValueId a = g.add_node(Op::Relu, "a", {x}, 1)[0];
  ValueId b = g.add_node(Op::Neg, "b", {a}, 1)[0];
  ValueId y = g.add_node(Op::Relu, "y", {b}, 1)[0];
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  const auto bytes = static_bytes(g);
  MemoryPlanOptions o;
  o.plannable = [](const Node& n, size_t) { return n.name != "b"; };
  const MemoryPlan plan = plan_memory(g, bytes, o);
  EXPECT_EQ(check_plan(g, bytes, plan), 1u);
  EXPECT_TRUE(plan.in_arena(a));
  EXPECT_FALSE(plan.in_arena(b));
  EXPECT_EQ(plan.unplanned_values, 1u);
}

// Random DAGs (each node reads one or two earlier values) with random sizes given to the
// planner directly: the brute-force check on 300 of them, with views mixed in.
TEST(MemoryPlan, RandomGraphsPassTheBruteForceCheck) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 300; ++iter) {
    Graph g;
    std::vector<ValueId> vals{g.add_input("x", DType::F32, {16})};
    const int nodes = 2 + static_cast<int>(rng() % 40);
    for (int i = 0; i < nodes; ++i) {
      const ValueId a = vals[rng() % vals.size()];
      const int kind = static_cast<int>(rng() % 4);
      ValueId out;
      if (kind == 0) out = g.add_node(Op::Add, fmt::format("n{}", i), {a, vals[rng() % vals.size()]}, 1)[0];
      else if (kind == 1) out = g.add_node(Op::Identity, fmt::format("n{}", i), {a}, 1)[0];
      else out = g.add_node(Op::Relu, fmt::format("n{}", i), {a}, 1)[0];
      vals.push_back(out);
    }
    g.mark_output(vals.back());
    if (rng() % 2) g.mark_output(vals[1 + rng() % (vals.size() - 1)]);
    std::vector<int64_t> bytes(g.values().size(), -1);
    for (size_t v = 0; v < bytes.size(); ++v) {
      const ValueId r = storage_root(g, static_cast<ValueId>(v));
      if (static_cast<size_t>(r) < v) bytes[v] = bytes[static_cast<size_t>(r)];  // a view: its input's size
      else bytes[v] = rng() % 10 == 0 ? -1 : static_cast<int64_t>(1 + rng() % 100000);
    }
    const MemoryPlan plan = plan_memory(g, bytes, {});
    check_plan(g, bytes, plan);
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << iter;
      return;
    }
  }
}

// The CPU executor with the plan (GPUOPT_MEMORY_PLAN=static) against the pool path, on a graph
// with views, a skip connection and a graph output read again inside the graph.
TEST(MemoryPlan, CpuExecutorMatchesThePoolPath) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 8});
  ValueId a = g.add_node(Op::Neg, "a", {x}, 1)[0];
  ValueId f = g.add_node(Op::Flatten, "f", {a}, 1, {{"axis", int_attr(0)}})[0];
  ValueId b = g.add_node(Op::Relu, "b", {f}, 1)[0];
  ValueId c = g.add_node(Op::Exp, "c", {b}, 1)[0];
  ValueId d = g.add_node(Op::Add, "d", {c, f}, 1)[0];
  ValueId e = g.add_node(Op::Mul, "e", {d, b}, 1)[0];
  g.mark_output(d);
  g.mark_output(e);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto run = [&](const char* mode, int64_t batch, RunProfile* prof) {
    setenv("GPUOPT_MEMORY_PLAN", mode, 1);
    auto backend = create_backend("cpu");
    auto exe = (*backend)->compile(g, {});
    unsetenv("GPUOPT_MEMORY_PLAN");
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    std::vector<float> in(static_cast<size_t>(batch * 8));
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
    RunOptions ro;
    ro.profile = prof;
    std::vector<std::vector<Tensor>> outs;
    for (int k = 0; k < 2; ++k) {  // the second run reuses the arena
      auto o = (*exe)->run({Tensor::from_vector(DType::F32, {batch, 8}, in)}, ro);
      EXPECT_TRUE(o.ok()) << o.status().to_string();
      outs.push_back(*o);
    }
    for (size_t i = 0; i < outs[0].size(); ++i)
      for (int64_t k = 0; k < outs[0][i].numel(); ++k) EXPECT_EQ(outs[0][i].get_f64(k), outs[1][i].get_f64(k));
    return outs[1];
  };
  for (int64_t batch : {1, 5}) {
    RunProfile ps, pp;
    auto s = run("static", batch, &ps);
    auto p = run("pool", batch, &pp);
    ASSERT_EQ(s.size(), p.size());
    for (size_t i = 0; i < s.size(); ++i) {
      ASSERT_EQ(s[i].shape(), p[i].shape());
      for (int64_t k = 0; k < s[i].numel(); ++k) EXPECT_EQ(s[i].get_f64(k), p[i].get_f64(k)) << i << " " << k;
    }
    // Static: a (with its view f), b, c in the arena, live together at c: 3 buffers of 256-byte
    // granules; d and e (outputs) outside. Pool: Flatten copies, so f is one more tensor.
    const int64_t t = batch * 8 * 4, granule = (t + 255) / 256 * 256;
    EXPECT_EQ(ps.peak_intermediate_bytes, 3 * granule + 2 * t);
    EXPECT_GT(pp.peak_intermediate_bytes, 0);
  }
}

TEST(MemoryPlan, BadSettingIsOneLine) {
  setenv("GPUOPT_MEMORY_PLAN", "arena", 1);
  auto mode = KernelSettings::from_env();
  unsetenv("GPUOPT_MEMORY_PLAN");
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("GPUOPT_MEMORY_PLAN='arena': expected static or pool"), std::string::npos);
  // The CPU backend refuses to compile under it, with that line.
  Graph g;
  g.mark_output(g.add_node(Op::Relu, "r", {g.add_input("x", DType::F32, {4})}, 1)[0]);
  ASSERT_TRUE(g.infer_shapes().ok());
  setenv("GPUOPT_MEMORY_PLAN", "arena", 1);
  auto exe = (*create_backend("cpu"))->compile(g, {});
  unsetenv("GPUOPT_MEMORY_PLAN");
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("GPUOPT_MEMORY_PLAN='arena'"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
