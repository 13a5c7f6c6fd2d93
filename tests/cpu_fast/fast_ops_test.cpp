// The fast CPU backend's GEMMs and convolutions against the CPU reference (fast_test_util.h):
// odd shapes, 1 thread and the whole pool (GPUOPT_NUM_THREADS=3 unless set: an odd split on any
// machine), and a check that the fast kernel ran rather than handing the call to the reference.
#include "fast_test_util.h"

namespace gpuopt::fast_test {
namespace {

// Before the pool starts (it reads the variable once): 3 threads, unless the caller chose.
[[maybe_unused]] const bool kThreadsSet = (setenv("GPUOPT_NUM_THREADS", "3", 0), true);

// ---- GEMMs ------------------------------------------------------------------------------------

TEST(FastCpu, MatMulOddShapesAndBatchBroadcast) {
  check(one_node(Op::MatMul, {{rand_f32({7, 29})}, {rand_f32({29, 13}), true}}));
  check(one_node(Op::MatMul, {{rand_f32({3, 5, 37})}, {rand_f32({37, 300})}}));  // rows of one GEMM
  check(one_node(Op::MatMul, {{rand_f32({2, 3, 9, 17})}, {rand_f32({3, 17, 11})}}));  // batch broadcast
  check(one_node(Op::MatMul, {{rand_f32({1, 9, 17})}, {rand_f32({4, 17, 5})}}));
  check(one_node(Op::MatMul, {{rand_f32({130, 257})}, {rand_f32({257, 70})}}));  // split by rows
}

TEST(FastCpu, GemmTransposesBiasAndActivations) {
  for (int ta : {0, 1})
    for (int tb : {0, 1}) {
      Tensor a = ta ? rand_f32({31, 19}) : rand_f32({19, 31});
      Tensor b = tb ? rand_f32({23, 31}) : rand_f32({31, 23});
      check(one_node(Op::Gemm, {{a}, {b, true}, {rand_f32({23}), true}},
                     attrs({{"transA", int_attr(ta)}, {"transB", int_attr(tb)}, {"alpha", float_attr(0.7f)},
                            {"beta", float_attr(1.3f)}})));
    }
  check(one_node(Op::Gemm, {{rand_f32({67, 45})}, {rand_f32({45, 33})}, {rand_f32({67, 1})}}));
  check(one_node(Op::Gemm, {{rand_f32({67, 45})}, {rand_f32({45, 33})}, {rand_f32({67, 33})}}));
  check(one_node(Op::Gemm, {{rand_f32({5, 45})}, {rand_f32({45, 33})}}));
  for (const char* act : {"Relu", "Gelu"})
    check(one_node(Op::FusedGemm, {{rand_f32({50, 64}, -2, 2)}, {rand_f32({96, 64}), true}, {rand_f32({96}), true}},
                   attrs({{"transB", int_attr(1)}, {"activation", string_attr(act)}})));
  check(one_node(Op::FusedGemm, {{rand_f32({50, 64}, -2, 2)}, {rand_f32({64, 96}), true}, {rand_f32({96}), true}},
                 attrs({{"activation", string_attr("Gelu")}, {"approximate", string_attr("tanh")}})));
}

// ---- convolutions -------------------------------------------------------------------------------

Tensor conv_w(int64_t m, int64_t cg, int64_t kh, int64_t kw) { return rand_f32({m, cg, kh, kw}, -0.5f, 0.5f); }

TEST(FastCpu, ConvGeometries) {
  // 3x3 pad 1; stride 2 with asymmetric pads and dilation; 1x1 as a GEMM; 1x1 strided; 7x7 stem.
  check(one_node(Op::Conv, {{rand_f32({2, 5, 11, 9})}, {conv_w(7, 5, 3, 3), true}, {rand_f32({7}), true}},
                 attrs({{"pads", ints_attr({1, 1, 1, 1})}})));
  check(one_node(Op::Conv, {{rand_f32({1, 6, 13, 10})}, {conv_w(4, 6, 3, 2), true}},
                 attrs({{"pads", ints_attr({2, 0, 1, 1})}, {"strides", ints_attr({2, 3})}, {"dilations", ints_attr({2, 1})}})));
  check(one_node(Op::Conv, {{rand_f32({3, 16, 7, 5})}, {conv_w(24, 16, 1, 1), true}}));
  check(one_node(Op::Conv, {{rand_f32({2, 16, 9, 9})}, {conv_w(8, 16, 1, 1), true}}, attrs({{"strides", ints_attr({2, 2})}})));
  check(one_node(Op::Conv, {{rand_f32({1, 3, 41, 37})}, {conv_w(8, 3, 7, 7), true}, {rand_f32({8}), true}},
                 attrs({{"pads", ints_attr({3, 3, 3, 3})}, {"strides", ints_attr({2, 2})}})));
  check(one_node(Op::Conv, {{rand_f32({1, 4, 6, 6})}, {conv_w(5, 4, 3, 3), true}}, attrs({{"auto_pad", string_attr("SAME_UPPER")}})));
  // Many output positions (several im2col tiles per image).
  check(one_node(Op::Conv, {{rand_f32({1, 8, 45, 47})}, {conv_w(12, 8, 3, 3), true}}, attrs({{"pads", ints_attr({1, 1, 1, 1})}})));
}

TEST(FastCpu, ConvGroupedAndDepthwise) {
  check(one_node(Op::Conv, {{rand_f32({2, 6, 9, 8})}, {conv_w(9, 2, 3, 3), true}, {rand_f32({9}), true}},
                 attrs({{"group", int_attr(3)}, {"pads", ints_attr({1, 1, 1, 1})}})));
  check(one_node(Op::Conv, {{rand_f32({2, 7, 10, 11})}, {conv_w(7, 1, 3, 3), true}, {rand_f32({7}), true}},
                 attrs({{"group", int_attr(7)}, {"pads", ints_attr({1, 1, 1, 1})}, {"strides", ints_attr({2, 2})}})));
  check(one_node(Op::Conv, {{rand_f32({1, 5, 12, 9})}, {conv_w(10, 1, 5, 5), true}},  // channel multiplier 2
                 attrs({{"group", int_attr(5)}, {"pads", ints_attr({2, 1, 2, 3})}, {"dilations", ints_attr({1, 2})}})));
}

TEST(FastCpu, FusedConvResidualAndActivations) {
  const Shape y{2, 6, 8, 7};
  for (const char* act : {"Relu", "", "Sigmoid", "Tanh", "HardSwish", "Swish"})
    check(one_node(Op::FusedConv,
                   {{rand_f32({2, 4, 8, 7})}, {conv_w(6, 4, 3, 3), true}, {rand_f32({6}), true}, {rand_f32(y)}},
                   attrs({{"pads", ints_attr({1, 1, 1, 1})}, {"activation", string_attr(act)}})));
  check(one_node(Op::FusedConv, {{rand_f32({1, 4, 8, 7})}, {conv_w(6, 4, 1, 1), true}, {rand_f32({6}), true}},
                 attrs({{"activation", string_attr("LeakyRelu")}, {"activation_params", floats_attr({0.1f})}})));
  check(one_node(Op::FusedConv, {{rand_f32({1, 4, 8, 7})}, {conv_w(4, 1, 3, 3), true}, {rand_f32({4}), true}},
                 attrs({{"group", int_attr(4)}, {"pads", ints_attr({1, 1, 1, 1})}, {"activation", string_attr("Clip")},
                        {"activation_params", floats_attr({-0.2f, 0.3f})}})));
}

}  // namespace
}  // namespace gpuopt::fast_test
