// The convolutions the fast backend routes to oneDNN (builds with it; conv_dnnl.h) against the
// CPU reference: each shape class (3x3 stride 1 and 2, 7x7 stem on 3 channels),
// bias, residual and activations, odd extents, batch 1 (work split by output-channel blocks) and
// batch > 1 (by image), 1 thread and the pool (3 threads unless GPUOPT_NUM_THREADS is set), and a
// check that oneDNN ran the call. In builds without oneDNN the same cases check the sgemm path.
#include "backends/cpu_fast/conv_dnnl.h"
#include "fast_test_util.h"

namespace gpuopt::fast_test {
namespace {

[[maybe_unused]] const bool kThreadsSet = (setenv("GPUOPT_NUM_THREADS", "3", 0), true);

Tensor conv_w(int64_t m, int64_t c, int64_t k) {
  return rand_f32({m, c, k, k}, -0.3f, 0.3f);
}

// check() runs the node twice (1 thread, the pool); `dnnl` says whether both must go to oneDNN.
void check_routed(const OneNode& o, bool dnnl) {
  const uint64_t before = cpu_fast::dnnl_conv_calls();
  check(o);
  const uint64_t want = dnnl && cpu_fast::have_dnnl() ? 2 : 0;
  EXPECT_EQ(cpu_fast::dnnl_conv_calls() - before, want) << "calls oneDNN ran";
}

AttributeMap conv_attrs(int64_t stride, int64_t pad, const char* act = "") {
  AttributeMap a = attrs({{"strides", ints_attr({stride, stride})}, {"pads", ints_attr({pad, pad, pad, pad})}});
  if (*act) a["activation"] = string_attr(act);
  return a;
}

TEST(FastCpuDnnl, ThreeByThreeStrideOneAndTwo) {
  // Batch 1, 48 output channels: split in 3 parts of 16 on 3 threads; 32: one part.
  check_routed(one_node(Op::Conv, {{rand_f32({1, 32, 13, 11})}, {conv_w(48, 32, 3), true}, {rand_f32({48}), true}},
                        conv_attrs(1, 1)),
               true);
  check_routed(one_node(Op::Conv, {{rand_f32({1, 16, 9, 10})}, {conv_w(32, 16, 3), true}}, conv_attrs(1, 1)), true);
  check_routed(one_node(Op::Conv, {{rand_f32({1, 32, 15, 17})}, {conv_w(32, 32, 3), true}}, conv_attrs(2, 1)), true);
  // Batch 3 (one image per thread), unpadded, odd extents.
  check_routed(one_node(Op::Conv, {{rand_f32({3, 16, 7, 9})}, {conv_w(16, 16, 3), true}, {rand_f32({16}), true}},
                        conv_attrs(1, 0)),
               true);
  // Channel counts that are no multiple of 8 (oneDNN's channels-last layout).
  check_routed(one_node(Op::Conv, {{rand_f32({1, 5, 9, 9})}, {conv_w(7, 5, 3), true}}, conv_attrs(1, 1)), true);
  check_routed(one_node(Op::Conv, {{rand_f32({2, 12, 8, 9})}, {conv_w(20, 12, 3), true}}, conv_attrs(2, 1)), true);
  // Asymmetric pads and dilation.
  check_routed(one_node(Op::Conv, {{rand_f32({2, 16, 12, 10})}, {conv_w(32, 16, 3), true}},
                        attrs({{"pads", ints_attr({2, 0, 1, 1})}, {"dilations", ints_attr({2, 1})}})),
               true);
}

TEST(FastCpuDnnl, Stem) {
  check_routed(one_node(Op::Conv, {{rand_f32({1, 3, 41, 37})}, {conv_w(16, 3, 7), true}, {rand_f32({16}), true}},
                        conv_attrs(2, 3)),
               true);
  check_routed(one_node(Op::Conv, {{rand_f32({2, 3, 30, 30})}, {conv_w(32, 3, 7), true}}, conv_attrs(2, 3)), true);
}

TEST(FastCpuDnnl, FusedBiasResidualActivation) {
  for (const char* act : {"Relu", "", "HardSwish"})
    check_routed(
        one_node(
            Op::FusedConv,
            {{rand_f32({1, 16, 9, 8})}, {conv_w(48, 16, 3), true}, {rand_f32({48}), true}, {rand_f32({1, 48, 9, 8})}},
            conv_attrs(1, 1, act)),
        true);
  check_routed(
      one_node(
          Op::FusedConv,
          {{rand_f32({2, 32, 10, 10})}, {conv_w(16, 32, 3), true}, {rand_f32({16}), true}, {rand_f32({2, 16, 5, 5})}},
          conv_attrs(2, 1, "Relu")),
      true);
}

TEST(FastCpuDnnl, ShapesItLeavesToSgemm) {
  // 1x1 (sgemm on the input as it is, or on its subsample), grouped, weights that are not
  // constants: the sgemm path, still against the reference.
  check_routed(one_node(Op::Conv, {{rand_f32({1, 32, 7, 7})}, {conv_w(32, 32, 1), true}}), false);
  check_routed(one_node(Op::Conv, {{rand_f32({1, 64, 14, 13})}, {conv_w(48, 64, 1), true}}, conv_attrs(2, 0)), false);
  check_routed(one_node(Op::Conv, {{rand_f32({1, 32, 7, 7})}, {rand_f32({32, 8, 3, 3}), true}},
                        attrs({{"group", int_attr(4)}, {"pads", ints_attr({1, 1, 1, 1})}})),
               false);
  check_routed(one_node(Op::Conv, {{rand_f32({1, 16, 9, 9})}, {conv_w(16, 16, 3)}}, conv_attrs(1, 1)), false);
}

}  // namespace
}  // namespace gpuopt::fast_test
