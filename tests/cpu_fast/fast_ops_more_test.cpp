// The fast CPU backend's attention, softmax, norms, elementwise ops and pools against the CPU
// reference (fast_test_util.h): odd shapes, 1 thread and the whole pool, and a check that the
// fast kernel ran.
#include "fast_test_util.h"

namespace gpuopt::fast_test {
namespace {

Tensor bool_mask(Shape s) {
  Tensor t = Tensor::empty(DType::Bool, std::move(s));
  std::bernoulli_distribution keep(0.8);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<uint8_t*>(t.raw())[i] = keep(rng()) ? 1 : 0;
  return t;
}

// ---- attention and softmax ----------------------------------------------------------------------

TEST(FastCpu, Attention4dMasksCausalAndGroupedHeads) {
  // [B, H, S, D]: no mask; an additive [Sq, T] mask; a bool [B, 1, Sq, T] mask; causal; GQA.
  check(one_node(Op::Attention, {{rand_f32({2, 3, 7, 8})}, {rand_f32({2, 3, 9, 8})}, {rand_f32({2, 3, 9, 5})}}, {}, 1));
  check(one_node(Op::Attention, {{rand_f32({2, 3, 7, 8})}, {rand_f32({2, 3, 9, 8})}, {rand_f32({2, 3, 9, 5})},
                                 {rand_f32({7, 9}, -3, 0)}},
                 attrs({{"scale", float_attr(0.4f)}}), 1));
  check(one_node(Op::Attention, {{rand_f32({2, 4, 5, 6})}, {rand_f32({2, 2, 5, 6})}, {rand_f32({2, 2, 5, 6})},
                                 {bool_mask({2, 1, 5, 5})}},
                 attrs({{"is_causal", int_attr(1)}}), 1));
  // Fewer (batch, head) pairs than threads: each head's query rows split too (7 rows: 4 + 3 on
  // 3 threads with 2 heads), with a causal mask, a per-row additive mask, and a single head.
  check(one_node(Op::Attention, {{rand_f32({1, 2, 7, 8})}, {rand_f32({1, 2, 7, 8})}, {rand_f32({1, 2, 7, 4})},
                                 {rand_f32({1, 2, 7, 7}, -2, 0)}},
                 attrs({{"is_causal", int_attr(1)}}), 1));
  check(one_node(Op::Attention, {{rand_f32({1, 1, 5, 6})}, {rand_f32({1, 1, 9, 6})}, {rand_f32({1, 1, 9, 6})},
                                 {bool_mask({1, 1, 5, 9})}},
                 {}, 1));
  // A mask shorter than the keys: the columns past it are masked out.
  check(one_node(Op::Attention, {{rand_f32({1, 2, 4, 8})}, {rand_f32({1, 2, 6, 8})}, {rand_f32({1, 2, 6, 8})},
                                 {rand_f32({1, 4}, -1, 0)}}, {}, 1));
}

TEST(FastCpu, Attention3dAndPackedQkv) {
  // 3-D [B, S, H*D] with heads from the attributes, as exporters write it.
  check(one_node(Op::Attention, {{rand_f32({2, 7, 12})}, {rand_f32({2, 9, 6})}, {rand_f32({2, 9, 10})}},
                 attrs({{"q_num_heads", int_attr(2)}, {"kv_num_heads", int_attr(1)}}), 1));
  // merge_qkv's form: one [B, S, (Hq + 2 Hkv) D] tensor and a key-padding mask [B, 1, 1, S].
  check(one_node(Op::Attention, {{rand_f32({3, 11, 3 * 4 * 8})}, {Tensor{}, false, true}, {Tensor{}, false, true},
                                 {rand_f32({3, 1, 1, 11}, -5, 0)}},
                 attrs({{"qkv_packed", int_attr(1)}, {"q_num_heads", int_attr(4)}, {"kv_num_heads", int_attr(4)},
                        {"nan_to_zero", int_attr(1)}}),
                 1));
}

TEST(FastCpu, SoftmaxLastAxis) {
  check(one_node(Op::Softmax, {{rand_f32({3, 5, 37}, -20, 20)}}, {}, 1, 17));
  check(one_node(Op::Softmax, {{rand_f32({4, 1000}, -5, 5)}}, attrs({{"axis", int_attr(1)}}), 1, 17));
}

// ---- norms ----------------------------------------------------------------------------------------

TEST(FastCpu, LayerNormalization) {
  check(one_node(Op::LayerNormalization, {{rand_f32({3, 7, 77}, -3, 5)}, {rand_f32({77}), true}, {rand_f32({77}), true}},
                 attrs({{"epsilon", float_attr(1e-5f)}}), 3, 17, {true, false, false}));
  check(one_node(Op::LayerNormalization, {{rand_f32({5, 33})}, {rand_f32({33}), true}}, {}, 3, 17, {true, false, false}));
}

TEST(FastCpu, SkipLayerNormalization) {
  const Shape x{2, 9, 45};
  check(one_node(Op::SkipLayerNormalization, {{rand_f32(x)}, {rand_f32(x)}, {rand_f32({45}), true}, {rand_f32({45}), true},
                                              {rand_f32({45}), true}},
                 {}, 4, 17, {true, false, false, true}));  // with the sum output (pre-LN blocks)
  check(one_node(Op::SkipLayerNormalization, {{rand_f32(x)}, {rand_f32({9, 45})}, {rand_f32({45}), true}},
                 attrs({{"epsilon", float_attr(1e-6f)}}), 1));  // skip repeats over the batch
}

// ---- elementwise and pools ----------------------------------------------------------------------------

TEST(FastCpu, BinaryOpsSameShapeSuffixAndScalar) {
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div}) {
    check(one_node(op, {{rand_f32({3, 5, 7})}, {rand_f32({3, 5, 7}, 0.5f, 2)}}));
    check(one_node(op, {{rand_f32({3, 5, 7})}, {rand_f32({7}, 0.5f, 2), true}}));  // bias
    check(one_node(op, {{rand_f32({1, 5, 7}, 0.5f, 2)}, {rand_f32({4, 5, 7}, 0.5f, 2)}}));  // a repeats
    check(one_node(op, {{rand_f32({}, 0.5f, 2)}, {rand_f32({40000}, 0.5f, 2)}}));  // scalar, split
  }
}

TEST(FastCpu, UnaryActivations) {
  const Shape s{3, 7, 1001};
  check(one_node(Op::Relu, {{rand_f32(s, -3, 3)}}));
  check(one_node(Op::Tanh, {{rand_f32(s, -12, 12)}}));
  check(one_node(Op::Sigmoid, {{rand_f32(s, -30, 30)}}));
  check(one_node(Op::Erf, {{rand_f32(s, -5, 5)}}));
  check(one_node(Op::Gelu, {{rand_f32(s, -8, 8)}}, {}, 1, 20));
  check(one_node(Op::Gelu, {{rand_f32(s, -8, 8)}}, attrs({{"approximate", string_attr("tanh")}}), 1, 20));
}

TEST(FastCpu, Pools) {
  check(one_node(Op::GlobalAveragePool, {{rand_f32({3, 5, 7, 9})}}));
  check(one_node(Op::MaxPool, {{rand_f32({2, 3, 13, 11})}},
                 attrs({{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})}})));
  check(one_node(Op::MaxPool, {{rand_f32({1, 4, 10, 9})}},
                 attrs({{"kernel_shape", ints_attr({2, 3})}, {"strides", ints_attr({2, 2})}, {"ceil_mode", int_attr(1)},
                        {"dilations", ints_attr({2, 1})}})));
}

// A node whose shapes the fast kernel does not take runs on the reference, same result.
TEST(FastCpu, UnsupportedShapesFallBackToTheReference) {
  OneNode o = one_node(Op::Add, {{rand_f32({3, 1, 7})}, {rand_f32({3, 5, 1})}});  // two-sided broadcast
  auto ref = make_cpu_backend();
  auto fast = make_fast_cpu_backend();
  const std::vector<Tensor> want = run(*ref, o);
  const uint64_t before = cpu_fast::fast_kernel_calls();
  const std::vector<Tensor> got = run(*fast, o);
  EXPECT_EQ(cpu_fast::fast_kernel_calls(), before);
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < want[0].numel(); ++i) EXPECT_EQ(got[0].get_f64(i), want[0].get_f64(i));
  // A non-f32 node is not claimed at all.
  Tensor a = Tensor::from_vector<int64_t>(DType::I64, {3}, {1, 2, 3});
  OneNode ints = one_node(Op::Add, {{a}, {a}});
  EXPECT_EQ(fast->place(ints.g)[0], NodePlace::kCpuFallback);
}

}  // namespace
}  // namespace gpuopt::fast_test
