// Chains of convolutions whose activations the fast backend keeps NHWC between its oneDNN
// convolutions (plan_channels_last()): ResNet-style bottlenecks (1x1, 3x3, 1x1 with the residual
// and Relu fused, a strided 1x1 shortcut), against the CPU reference at 1 thread and the pool
// (3 threads unless GPUOPT_NUM_THREADS is set), batch 1 (slabs of output rows, and output-channel
// slices when the rows are fewer than the threads) and 3, odd extents;
// a value also read by another op stays NCHW. In builds without oneDNN the same graphs check the
// sgemm path.
#include "backends/cpu_fast/conv_dnnl.h"
#include "fast_test_util.h"

namespace gpuopt::fast_test {
namespace {

[[maybe_unused]] const bool kThreadsSet = (setenv("GPUOPT_NUM_THREADS", "3", 0), true);

struct Net {
  Graph g;
  std::vector<Tensor> feeds;
  int convs = 0;
  ValueId conv(ValueId x, int64_t m, int64_t c, int64_t k, int64_t stride, const char* act = "",
               ValueId z = kNoValue) {
    std::string n = "c";  // (not "c" + to_string(): GCC 12's -Wrestrict false positive)
    n += std::to_string(convs++);
    const ValueId w = g.add_constant(n + "_w", rand_f32({m, c, k, k}, -0.3f, 0.3f));
    const ValueId b = g.add_constant(n + "_b", rand_f32({m}));
    AttributeMap a = attrs({{"strides", ints_attr({stride, stride})},
                            {"pads", ints_attr({k / 2, k / 2, k / 2, k / 2})}});
    if (*act) a["activation"] = string_attr(act);
    std::vector<ValueId> in{x, w, b};
    if (z != kNoValue) in.push_back(z);
    return g.add_node(z != kNoValue || *act ? Op::FusedConv : Op::Conv, n, in, 1, std::move(a))[0];
  }
};

// A bottleneck: 1x1 (Relu) -> 3x3 (stride, Relu) -> 1x1 + shortcut, Relu; the shortcut is the
// input itself or a strided 1x1 convolution of it.
ValueId bottleneck(Net& net, ValueId x, int64_t c, int64_t mid, int64_t out, int64_t stride) {
  const ValueId a = net.conv(x, mid, c, 1, 1, "Relu");
  const ValueId b = net.conv(a, mid, mid, 3, stride, "Relu");
  const ValueId s = (stride == 1 && c == out) ? x : net.conv(x, out, c, 1, stride);
  return net.conv(b, out, mid, 1, 1, "Relu", s);
}

// The graph's outputs on the fast backend (1 thread and the pool) against the reference; each
// run must put `dnnl_convs` convolutions on oneDNN (builds with it; the pool's run `pool_convs`
// when given).
void check_graph(Net& net, int dnnl_convs, int pool_convs = -1) {
  ASSERT_TRUE(net.g.topo_sort().ok());
  const Status st = net.g.infer_shapes();
  ASSERT_TRUE(st.ok()) << st.to_string();
  OneNode o{net.g, net.feeds};
  auto ref_backend = make_cpu_backend();
  const std::vector<Tensor> ref = run(*ref_backend, o);
  ASSERT_FALSE(ref.empty());
  for (int threads : {1, cpu_threads()}) {
    auto fast = make_fast_cpu_backend(threads);
    const uint64_t before = cpu_fast::dnnl_conv_calls();
    const std::vector<Tensor> got = run(*fast, o);
    const int want = threads > 1 && pool_convs >= 0 ? pool_convs : dnnl_convs;
    EXPECT_EQ(cpu_fast::dnnl_conv_calls() - before, cpu_fast::have_dnnl() ? static_cast<uint64_t>(want) : 0u)
        << "threads " << threads;
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].shape(), ref[k].shape());
      double scale = 1, err = 0;
      for (int64_t i = 0; i < ref[k].numel(); ++i) {
        scale = std::max(scale, std::abs(ref[k].get_f64(i)));
        err = std::max(err, std::abs(got[k].get_f64(i) - ref[k].get_f64(i)));
      }
      EXPECT_LE(err / scale, kTol) << "threads " << threads << ", output " << k;
    }
  }
}

TEST(FastCpuConvChain, BottlenecksStayChannelsLast) {
  for (int64_t batch : {1, 3}) {
    Net net;
    const Tensor x = rand_f32({batch, 16, 13, 11});
    net.feeds = {x};
    ValueId v = net.g.add_input("x", DType::F32, x.shape());
    v = net.conv(v, 32, 16, 3, 1, "Relu");    // stem-like, NCHW in
    v = bottleneck(net, v, 32, 16, 32, 1);    // identity shortcut
    v = bottleneck(net, v, 32, 16, 48, 2);    // strided, projected shortcut
    net.g.mark_output(v);                     // NCHW out
    SCOPED_TRACE(batch);
    check_graph(net, net.convs);  // every convolution, the 1x1 ones too
  }
}

TEST(FastCpuConvChain, SlabsOfFewRowsAndOddChannels) {
  // 5 and 2 output rows over 3 threads at batch 1; channel counts no multiple of 8.
  Net net;
  const Tensor x = rand_f32({1, 5, 9, 7});
  net.feeds = {x};
  ValueId v = net.g.add_input("x", DType::F32, x.shape());
  v = net.conv(v, 7, 5, 3, 2, "LeakyRelu");
  v = net.conv(v, 12, 7, 1, 1, "HardSwish");
  v = net.conv(v, 9, 12, 3, 2, "Clip");
  net.g.mark_output(v);
  net.g.nodes()[0].attrs["activation_params"] = floats_attr({0.1f});
  net.g.nodes()[2].attrs["activation_params"] = floats_attr({-0.5f, 0.5f});
  check_graph(net, 3);
}

TEST(FastCpuConvChain, ChannelSlicesWhenRowsAreFewerThanThreads) {
  // Batch 1, 2 output rows on 3 threads: slabs and slices of 32 + 16 output channels, each with
  // the residual (NCHW from the graph input, then NHWC from the chain) and activation applied
  // after oneDNN, on the slice.
  Net net;
  const Tensor x = rand_f32({1, 16, 4, 5});
  const Tensor z = rand_f32({1, 48, 2, 3});
  net.feeds = {x, z};
  const ValueId in = net.g.add_input("x", DType::F32, x.shape());
  const ValueId zin = net.g.add_input("z", DType::F32, z.shape());
  ValueId v = net.conv(in, 48, 16, 3, 2, "Relu", zin);
  v = net.conv(v, 48, 48, 1, 1, "HardSwish", v);
  v = net.conv(v, 40, 48, 3, 1, "Relu");
  net.g.mark_output(v);
  check_graph(net, 3);
}

TEST(FastCpuConvChain, ChannelsLastConvolutionOneDnnDeclines) {
  // The middle convolution pads 3 rows on each side of a 1-row input (5 output rows): on 3 or
  // more threads its last slab of output rows reads no input row, which oneDNN cannot take, so
  // it runs the sgemm path on NCHW copies of its NHWC input and writes its output back NHWC.
  Net net;
  const Tensor x = rand_f32({1, 8, 1, 6});
  net.feeds = {x};
  ValueId v = net.g.add_input("x", DType::F32, x.shape());
  v = net.conv(v, 16, 8, 3, 1, "Relu");
  const ValueId w = net.g.add_constant("wp", rand_f32({16, 16, 3, 3}, -0.3f, 0.3f));
  v = net.g.add_node(Op::Conv, "padded", {v, w}, 1, attrs({{"pads", ints_attr({3, 1, 3, 1})}}))[0];
  v = net.conv(v, 8, 16, 1, 1, "Relu");
  net.g.mark_output(v);
  check_graph(net, 3, cpu_threads() >= 3 ? 2 : 3);
}

TEST(FastCpuConvChain, ValueReadByAnotherOpStaysNchw) {
  // c0's output feeds c1 and a Relu (and is a graph output): NCHW; c1 -> c2 stays NHWC.
  Net net;
  const Tensor x = rand_f32({2, 8, 10, 10});
  net.feeds = {x};
  const ValueId in = net.g.add_input("x", DType::F32, x.shape());
  const ValueId a = net.conv(in, 16, 8, 3, 1);
  const ValueId r = net.g.add_node(Op::Relu, "relu", {a}, 1)[0];
  const ValueId b = net.conv(a, 16, 16, 1, 1, "Relu");
  const ValueId c = net.conv(b, 16, 16, 3, 1, "", a);
  net.g.mark_output(r);
  net.g.mark_output(a);
  net.g.mark_output(c);
  check_graph(net, 3);
}

}  // namespace
}  // namespace gpuopt::fast_test
