// sink_transposes checked on the CPU reference (the unrewritten graph's kernels are the oracle):
// torch MultiheadAttention's sequence-first export (packed in_proj, q/k/v selected by Gather,
// [S, B*H, D] head splits with targets computed from Shape, Linear as Reshape -> Gemm -> Reshape)
// becomes the head-split form, and with fuse_attention one Attention node and no Transpose; the
// dynamo exporter's K^T chain becomes one Transpose; chains whose Transpose something else reads,
// that a Reshape mixes (merging a moved dim) or that feed no movement are left as they are; a
// packed projection read by parts (q/k/v Gathers, GPT-2's Split) becomes one MatMul per part
// unless something reads it whole.
#include "pass_test_util.h"
#include "passes/passes.h"

#include <numeric>

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

constexpr int64_t kB = 3, kS = 5, kH = 2, kD = 4, kE = kH * kD;

ValueId i64s(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}
ValueId transpose(Graph& g, const std::string& name, ValueId x, std::vector<int64_t> p) {
  return g.add_node(Op::Transpose, name, {x}, 1, {{"perm", ints_attr(std::move(p))}})[0];
}
ValueId reshape(Graph& g, const std::string& name, ValueId x, ValueId target) {
  return g.add_node(Op::Reshape, name, {x, target}, 1)[0];
}

struct Built {
  Graph g;
  std::vector<Tensor> inputs;
};

Graph after_sink(const Graph& ref) {
  Graph g = ref;
  auto st = sink_transposes(&g);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  finish(g);
  return g;
}

int transposes(const Graph& g) { return count(g, "Transpose"); }

// The legacy export of torch.nn.MultiheadAttention(batch_first=True) with symbolic batch: x
// [N, S, E] -> [S, N, E], in_proj MatMul+Add to [S, N, 3E], Reshape [S, N, 3, E], Unsqueeze(0),
// Transpose(3,1,2,0,4), Squeeze(3), Gather 0/1/2; each Reshape [S, N*H, D] (N*H computed from
// Shape), Transpose(1,0,2), Reshape [N, H, S, D]; K^T Transpose(0,1,3,2); scores, Softmax,
// context; Transpose(2,0,1,3), Reshape [S*N, E], Gemm(out_proj, transB), Reshape [S, N, E],
// Transpose(1,0,2).
Built mha_legacy() {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  std::mt19937 rng(3);
  const int64_t n = g.symbol_dim("N");
  ValueId x = g.add_input("x", DType::F32, {n, kS, kE});
  b.inputs.push_back(uniform({kB, kS, kE}, rng));
  ValueId w_in = g.add_constant("w_in", uniform({kE, 3 * kE}, rng));
  ValueId b_in = g.add_constant("b_in", uniform({3 * kE}, rng));
  ValueId w_out = g.add_constant("w_out", uniform({kE, kE}, rng));  // [out, in]: transB
  ValueId b_out = g.add_constant("b_out", uniform({kE}, rng));
  ValueId t0 = transpose(g, "t0", x, {1, 0, 2});
  // batch from Shape(t0)[1], as the exporter reads it
  ValueId shp = g.add_node(Op::Shape, "shape", {t0}, 1)[0];
  ValueId bat = g.add_node(Op::Gather, "batch", {shp, g.add_constant("one", Tensor::scalar_i64(1))}, 1)[0];
  ValueId bh = g.add_node(Op::Mul, "bh", {bat, g.add_constant("h", Tensor::scalar_i64(kH))}, 1)[0];
  ValueId bh1 = g.add_node(Op::Unsqueeze, "bh1", {bh, i64s(g, "ax0", {0})}, 1)[0];
  ValueId split_t = g.add_node(Op::Concat, "split_t", {i64s(g, "s", {kS}), bh1, i64s(g, "d", {kD})}, 1, {{"axis", int_attr(0)}})[0];
  ValueId proj = g.add_node(Op::MatMul, "in_proj", {t0, w_in}, 1)[0];
  proj = g.add_node(Op::Add, "in_bias", {proj, b_in}, 1)[0];
  ValueId p4 = reshape(g, "pack", proj, i64s(g, "pack_t", {kS, -1, 3, kE}));
  ValueId p5 = g.add_node(Op::Unsqueeze, "unsq", {p4, i64s(g, "ax0b", {0})}, 1)[0];
  ValueId pt = transpose(g, "packt", p5, {3, 1, 2, 0, 4});
  ValueId sq = g.add_node(Op::Squeeze, "sq", {pt, i64s(g, "ax3", {3})}, 1)[0];
  ValueId heads[3];
  for (int i = 0; i < 3; ++i) {
    const std::string nm = std::string("qkv").substr(static_cast<size_t>(i), 1);
    ValueId s = g.add_node(Op::Gather, nm + "/select", {sq, g.add_constant(nm + "/i", Tensor::scalar_i64(i))}, 1)[0];
    s = reshape(g, nm + "/split", s, split_t);
    s = transpose(g, nm + "/t", s, {1, 0, 2});
    heads[i] = reshape(g, nm + "/heads", s, i64s(g, nm + "/heads_t", {-1, kH, kS, kD}));
  }
  ValueId kt = transpose(g, "kt", heads[1], {0, 1, 3, 2});
  ValueId sc = g.add_node(Op::MatMul, "scores", {heads[0], kt}, 1)[0];
  sc = g.add_node(Op::Mul, "scale", {sc, g.add_constant("c", Tensor::scalar_f32(0.5f))}, 1)[0];
  ValueId p = g.add_node(Op::Softmax, "softmax", {sc}, 1, {{"axis", int_attr(-1)}})[0];
  ValueId ctx = g.add_node(Op::MatMul, "context", {p, heads[2]}, 1)[0];
  ValueId m = transpose(g, "merge", ctx, {2, 0, 1, 3});
  m = reshape(g, "flat", m, i64s(g, "flat_t", {-1, kE}));
  m = g.add_node(Op::Gemm, "out_proj", {m, w_out, b_out}, 1, {{"transB", int_attr(1)}})[0];
  m = reshape(g, "unflat", m, i64s(g, "unflat_t", {kS, -1, kE}));
  ValueId y = g.add_node(Op::Transpose, "back", {m}, 1, {{"perm", ints_attr({1, 0, 2})}}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

TEST(SinkTransposes, MultiheadAttentionSequenceFirstBecomesTheHeadSplitForm) {
  const Built ref = mha_legacy();
  ASSERT_EQ(transposes(ref.g), 8);
  const Graph sunk = after_sink(ref.g);
  // Each of q, k^T, v one head-split Transpose, the merge one: what fuse_attention reads in place.
  EXPECT_EQ(transposes(sunk), 4);
  EXPECT_EQ(count(sunk, "Gemm"), 0);  // Linear on the [N, S, E] tensor: MatMul + Add
  // The packed in_proj split into q, k and v projections: no Gather of the parts is left.
  EXPECT_EQ(count(sunk, "MatMul"), 3 + 1 + 2);
  const auto want = run_cpu(ref.g, ref.inputs);
  EXPECT_LE(max_rel_err(run_cpu(sunk, ref.inputs), want), 1e-5);
  Graph fused = sunk;
  ASSERT_TRUE(fuse_attention(&fused).ok());
  finish(fused);
  EXPECT_EQ(count(fused, "Attention"), 1);
  EXPECT_EQ(transposes(fused), 0);
  EXPECT_LE(max_rel_err(run_cpu(fused, ref.inputs), want), 1e-5);
  // At another batch too (the Reshapes the pass writes copy the batch dim: 0 in the target).
  std::mt19937 rng(9);
  const std::vector<Tensor> other{uniform({1, kS, kE}, rng)};
  EXPECT_LE(max_rel_err(run_cpu(fused, other), run_cpu(ref.g, other)), 1e-5);
}

// The dynamo exporter's K^T: heads [N, H, S, D] flattened to [N*H, S, D], transposed, unflattened.
TEST(SinkTransposes, DynamoKeyTransposeChainBecomesOneTranspose) {
  Graph g;
  g.opset = 18;
  std::mt19937 rng(4);
  const int64_t n = g.symbol_dim("N");
  ValueId x = g.add_input("x", DType::F32, {n, kS, kE});
  const std::vector<Tensor> inputs{uniform({kB, kS, kE}, rng)};
  ValueId h = reshape(g, "split", x, i64s(g, "split_t", {-1, kS, kH, kD}));
  h = transpose(g, "heads", h, {0, 2, 1, 3});
  h = reshape(g, "flat", h, i64s(g, "flat_t", {-1, kS, kD}));
  h = transpose(g, "kt", h, {0, 2, 1});
  ValueId y = g.add_node(Op::Reshape, "unflat", {h, i64s(g, "unflat_t", {-1, kH, kD, kS})}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  const Graph sunk = after_sink(g);
  ASSERT_EQ(transposes(sunk), 1);
  for (const Node& nd : sunk.nodes())
    if (nd.op_type == "Transpose") {
      EXPECT_EQ(nd.attr_ints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
    }
  EXPECT_EQ(count(sunk, "Reshape"), 1);
  EXPECT_EQ(sunk.value(sunk.outputs()[0]).name, "y");
  EXPECT_LE(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 1e-6);
}

// Transposes that cancel through a Reshape splitting only a dim they do not move, and ones that
// compose: gone or one.
TEST(SinkTransposes, InversePairsAcrossASplitCancel) {
  Graph g;
  std::mt19937 rng(6);
  ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
  const std::vector<Tensor> inputs{uniform({kB, kS, kE}, rng)};
  ValueId t = transpose(g, "t", x, {1, 0, 2});
  t = reshape(g, "split", t, i64s(g, "split_t", {kS, kB, kH, kD}));
  t = transpose(g, "back", t, {1, 0, 2, 3});
  ValueId y = g.add_node(Op::Relu, "relu", {t}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  const Graph sunk = after_sink(g);
  EXPECT_EQ(transposes(sunk), 0);
  EXPECT_EQ(count(sunk, "Reshape"), 1);
  EXPECT_LE(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 0.0);
}

// Negative cases: the graph keeps its Transposes (and its values).
//  - a Transpose another node reads too (a graph output here, a Relu in the second graph);
//  - a Reshape that merges a moved dim with another (the permutation does not go through it);
//  - a Transpose before a MatMul whose result feeds no movement (Softmax): not worth sinking;
//  - a Gemm with transA (not a row-wise Linear).
TEST(SinkTransposes, LeavesTransposesItCannotMoveOrThatOthersRead) {
  std::mt19937 rng(8);
  auto check = [&](Graph& g, int want_t, const char* what) {
    SCOPED_TRACE(what);
    finish(g);
    std::vector<Tensor> inputs;
    for (ValueId in : g.inputs()) inputs.push_back(uniform(g.value(in).info.shape, rng));
    const Graph sunk = after_sink(g);
    EXPECT_EQ(transposes(sunk), want_t);
    EXPECT_EQ(transposes(sunk), transposes(g));
    EXPECT_LE(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 1e-6);
  };
  {
    Graph g;
    ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
    ValueId t = transpose(g, "t", x, {1, 0, 2});
    ValueId r = reshape(g, "split", t, i64s(g, "split_t", {kS, kB, kH, kD}));
    ValueId y = g.add_node(Op::Transpose, "back", {r}, 1, {{"perm", ints_attr({1, 0, 2, 3})}}, {"y"})[0];
    g.mark_output(y);
    g.mark_output(t);  // the first Transpose is an output too
    check(g, 2, "transpose read as a graph output");
  }
  {
    Graph g;
    ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
    ValueId t = transpose(g, "t", x, {1, 0, 2});
    ValueId r = reshape(g, "split", t, i64s(g, "split_t", {kS, kB, kH, kD}));
    ValueId y = g.add_node(Op::Transpose, "back", {r}, 1, {{"perm", ints_attr({1, 0, 2, 3})}}, {"y"})[0];
    ValueId z = g.add_node(Op::Relu, "other", {t}, 1, {}, {"z"})[0];
    g.mark_output(y);
    g.mark_output(z);
    check(g, 2, "transpose with another reader");
  }
  {
    Graph g;
    ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
    ValueId t = transpose(g, "t", x, {1, 0, 2});
    ValueId y = g.add_node(Op::Reshape, "merge", {t, i64s(g, "merge_t", {kS * kB, kE})}, 1, {}, {"y"})[0];
    g.mark_output(y);
    check(g, 1, "reshape merging the moved dims");
  }
  {
    Graph g;
    ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
    ValueId t = transpose(g, "t", x, {1, 0, 2});
    ValueId mm = g.add_node(Op::MatMul, "mm", {t, g.add_constant("w", uniform({kE, kE}, rng))}, 1)[0];
    ValueId y = g.add_node(Op::Softmax, "softmax", {mm}, 1, {{"axis", int_attr(-1)}}, {"y"})[0];
    g.mark_output(y);
    check(g, 1, "nothing below to join");
  }
  {
    Graph g;
    ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
    ValueId t = transpose(g, "t", x, {1, 0, 2});
    ValueId f = reshape(g, "flat", t, i64s(g, "flat_t", {kE, kS * kB}));
    ValueId gm = g.add_node(Op::Gemm, "gemm", {f, g.add_constant("w", uniform({kE, kE}, rng))}, 1, {{"transA", int_attr(1)}})[0];
    ValueId y = g.add_node(Op::Reshape, "unflat", {gm, i64s(g, "unflat_t", {kS, kB, kE})}, 1, {}, {"y"})[0];
    g.mark_output(y);
    check(g, 1, "gemm with transA");
  }
}

// A packed projection [N, S, 3E] read by parts: one MatMul per part when every reader is a
// one-index Gather over the parts' axis; left packed when something else reads the parts.
TEST(SinkTransposes, PackedProjectionSplitsOnlyWhenEveryReaderSelectsAPart) {
  for (const bool other_reader : {false, true}) {
    SCOPED_TRACE(other_reader ? "parts also read whole" : "three Gathers");
    Graph g;
    std::mt19937 rng(12);
    const int64_t n = g.symbol_dim("N");
    ValueId x = g.add_input("x", DType::F32, {n, kS, kE});
    const std::vector<Tensor> inputs{uniform({kB, kS, kE}, rng)};
    ValueId y = g.add_node(Op::MatMul, "in_proj", {x, g.add_constant("w", uniform({kE, 3 * kE}, rng))}, 1)[0];
    y = g.add_node(Op::Add, "bias", {g.add_constant("b", uniform({3 * kE}, rng)), y}, 1)[0];
    ValueId parts = reshape(g, "parts", y, i64s(g, "parts_t", {0, 0, 3, kE}));
    ValueId sum = kNoValue;
    const char* const names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      const std::string nm = names[i];
      ValueId index = g.add_constant(nm + "/i", Tensor::scalar_i64(i == 2 ? -1 : i));
      ValueId s = g.add_node(Op::Gather, nm + "/select", {parts, index}, 1, {{"axis", int_attr(-2)}})[0];
      sum = i == 0 ? s : g.add_node(Op::Mul, nm + "/product", {sum, s}, 1)[0];
    }
    if (other_reader) {
      ValueId whole = g.add_node(Op::ReduceSum, "whole", {parts, i64s(g, "axes", {2})}, 1, {{"keepdims", int_attr(0)}})[0];
      sum = g.add_node(Op::Add, "plus_whole", {sum, whole}, 1)[0];
    }
    ValueId out = g.add_node(Op::Identity, "out", {sum}, 1, {}, {"y"})[0];
    g.mark_output(out);
    finish(g);
    const Graph sunk = after_sink(g);
    EXPECT_EQ(count(sunk, "MatMul"), other_reader ? 1 : 3);
    EXPECT_EQ(count(sunk, "Gather"), other_reader ? 3 : 0);
    EXPECT_LE(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 1e-5);
  }
}

// GPT-2's c_attn: Split(MatMul(x, W) + b, last axis) -> one MatMul per part; kept when the
// packed result has another reader.
TEST(SinkTransposes, SplitOfAPackedProjectionBecomesOneProjectionPerPart) {
  for (const bool other_reader : {false, true}) {
    SCOPED_TRACE(other_reader ? "packed result read whole too" : "split only");
    Graph g;
    g.opset = 17;
    std::mt19937 rng(13);
    const int64_t n = g.symbol_dim("N");
    ValueId x = g.add_input("x", DType::F32, {n, kS, kE});
    const std::vector<Tensor> inputs{uniform({kB, kS, kE}, rng)};
    ValueId y = g.add_node(Op::MatMul, "c_attn", {x, g.add_constant("w", uniform({kE, 3 * kE}, rng))}, 1)[0];
    y = g.add_node(Op::Add, "bias", {y, g.add_constant("b", uniform({3 * kE}, rng))}, 1)[0];
    auto parts = g.add_node(Op::Split, "split", {y, i64s(g, "sizes", {kE, kE - 3, kE + 3})}, 3, {{"axis", int_attr(-1)}});
    ValueId out = g.add_node(Op::MatMul, "qq", {parts[0], transpose(g, "qt", parts[0], {0, 2, 1})}, 1)[0];
    for (int i : {1, 2}) {
      const std::string nm = i == 1 ? "k" : "v";
      ValueId sum = g.add_node(Op::ReduceSum, nm + "/sum", {parts[static_cast<size_t>(i)], i64s(g, nm + "/axes", {2})}, 1)[0];
      out = g.add_node(Op::Add, nm + "/plus", {out, sum}, 1)[0];
    }
    if (other_reader) {
      ValueId whole = g.add_node(Op::ReduceSum, "whole", {y, i64s(g, "axes2", {2})}, 1)[0];
      out = g.add_node(Op::Add, "plus_whole", {out, whole}, 1)[0];
    }
    out = g.add_node(Op::Identity, "out", {out}, 1, {}, {"y"})[0];
    g.mark_output(out);
    finish(g);
    const Graph sunk = after_sink(g);
    EXPECT_EQ(count(sunk, "Split"), other_reader ? 1 : 0);
    EXPECT_EQ(count(sunk, "MatMul"), other_reader ? 2 : 4);
    EXPECT_LE(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 1e-5);
  }
}

}  // namespace
}  // namespace gpuopt

namespace gpuopt {
namespace {

// Random chains of Transpose, Reshape (merging, splitting or refactoring dims), Unsqueeze and
// Squeeze over small tensors, each followed by a Relu so the chain has an end: whatever
// sink_transposes makes of a chain, the output is the same, element for element, and it never
// has more Transposes.
TEST(SinkTransposes, RandomMovementChainsKeepEveryElementInPlace) {
  std::mt19937 rng(2026);
  int rewritten = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    Graph g;
    g.opset = 17;
    std::vector<int64_t> dims;
    const int rank = 2 + static_cast<int>(rng() % 3);
    for (int i = 0; i < rank; ++i) dims.push_back(std::vector<int64_t>{1, 2, 3, 4, 6}[rng() % 5]);
    ValueId x = g.add_input("x", DType::F32, dims);
    const std::vector<Tensor> inputs{uniform(dims, rng)};
    const int ops = 2 + static_cast<int>(rng() % 5);
    for (int k = 0; k < ops; ++k) {
      const std::string nm = "op" + std::to_string(k);
      const int kind = static_cast<int>(rng() % 6);
      if (kind <= 1) {  // Transpose
        std::vector<int64_t> p(dims.size());
        std::iota(p.begin(), p.end(), 0);
        std::shuffle(p.begin(), p.end(), rng);
        std::vector<int64_t> nd;
        for (int64_t a : p) nd.push_back(dims[static_cast<size_t>(a)]);
        x = transpose(g, nm, x, p);
        dims = nd;
      } else if (kind == 2 && dims.size() > 1) {  // merge two neighbours
        const size_t i = rng() % (dims.size() - 1);
        dims[i] *= dims[i + 1];
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        x = reshape(g, nm, x, i64s(g, nm + "/t", dims));
      } else if (kind == 3) {  // split a dim
        const size_t i = rng() % dims.size();
        for (int64_t a : {2, 3}) {
          if (dims[i] % a == 0 && dims[i] > a) {
            dims[i] /= a;
            dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(i), a);
            break;
          }
        }
        x = reshape(g, nm, x, i64s(g, nm + "/t", dims));
      } else if (kind == 4) {  // refactor the whole tensor (boundaries need not line up)
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        std::vector<int64_t> nd;
        for (int64_t f : {2, 3, 2, 2, 3}) {
          if (n % f == 0 && rng() % 2) {
            nd.push_back(f);
            n /= f;
          }
        }
        nd.push_back(n);
        std::shuffle(nd.begin(), nd.end(), rng);
        dims = nd;
        x = reshape(g, nm, x, i64s(g, nm + "/t", dims));
      } else if (dims.size() < 5) {  // Unsqueeze, then maybe Squeeze it again elsewhere
        const int64_t a = static_cast<int64_t>(rng() % (dims.size() + 1));
        dims.insert(dims.begin() + a, 1);
        x = g.add_node(Op::Unsqueeze, nm, {x, i64s(g, nm + "/axes", {a})}, 1)[0];
        for (size_t i = 0; i < dims.size(); ++i) {
          if (dims[i] == 1 && static_cast<int64_t>(i) != a && rng() % 2) {
            dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(i));
            x = g.add_node(Op::Squeeze, nm + "/sq", {x, i64s(g, nm + "/sq_axes", {static_cast<int64_t>(i)})}, 1)[0];
            break;
          }
        }
      }
    }
    ValueId y = g.add_node(Op::Relu, "end", {x}, 1, {}, {"y"})[0];
    g.mark_output(y);
    finish(g);
    const Graph sunk = after_sink(g);
    EXPECT_LE(transposes(sunk), transposes(g));
    rewritten += sunk.nodes().size() < g.nodes().size();
    EXPECT_EQ(max_rel_err(run_cpu(sunk, inputs), run_cpu(g, inputs)), 0.0);
  }
  EXPECT_GT(rewritten, 100);  // most chains get shorter
}

}  // namespace
}  // namespace gpuopt
