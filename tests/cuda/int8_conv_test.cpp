// Int8Conv / Int8Add on the GPU (GPUOPT_INT8_CONV=1): a QDQ residual block at --precision int8
// on CUDA, folded into channels-last Int8Convs (the residual add in the last one), against the CPU reference's
// int8 session (exact QDQ semantics), eagerly and replayed as a CUDA graph; and the epilogue
// constants' kernel against the host arithmetic it must equal bit for bit.
#include "session_util.h"

#include "ops/quant/cuda/int8_conv.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace gpuopt::testing {
namespace {

struct Qdq {
  Graph g;
  std::mt19937 rng{41};
  int next = 0;

  std::string name(const char* what) { return std::string(what) + std::to_string(next++); }
  ValueId quantize(ValueId x, float scale) {
    const std::string n = name("quantize");
    return g.add_node(Op::QuantizeLinear, n,
                      {x, g.add_constant(n + ".s", Tensor::scalar_f32(scale)),
                       g.add_constant(n + ".z", Tensor::zeros(DType::I8, {}))},
                      1)[0];
  }
  ValueId dequantize(ValueId q) {
    const Node& qn = g.nodes()[static_cast<size_t>(g.value(q).producer)];
    return g.add_node(Op::DequantizeLinear, name("dequantize"), {q, qn.inputs[1], qn.inputs[2]}, 1)[0];
  }
  ValueId conv(ValueId xq, int64_t cin, int64_t cout, int64_t k) {
    const std::string n = name("conv");
    Tensor wq = Tensor::empty(DType::I8, {cout, cin, k, k});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    Tensor ws = Tensor::empty(DType::F32, {cout});
    for (int64_t i = 0; i < cout; ++i) ws.set_f64(i, (0.6 + 0.1 * static_cast<double>(i % 5)) * 1.7 / std::sqrt(cin * k * k) / 127);
    AttributeMap ax;
    ax["axis"] = int_attr(0);
    const ValueId wd = g.add_node(Op::DequantizeLinear, n + "/dqw",
                                  {g.add_constant(n + ".wq", wq), g.add_constant(n + ".ws", ws),
                                   g.add_constant(n + ".wz", Tensor::zeros(DType::I8, {cout}))},
                                  1, ax)[0];
    AttributeMap a;
    a["kernel_shape"] = ints_attr({k, k});
    a["pads"] = ints_attr({k / 2, k / 2, k / 2, k / 2});
    return g.add_node(Op::Conv, n, {dequantize(xq), wd, g.add_constant(n + ".b", randn({cout}, 3, 0.2f))}, 1, a)[0];
  }
  ValueId relu(ValueId x) { return g.add_node(Op::Relu, name("relu"), {x}, 1)[0]; }
};

// x -> Q -> [conv3x3 -> Relu -> Q -> conv3x3 -> Q] + x -> Relu -> Q -> conv1x1 (float out).
Graph residual_block() {
  Qdq b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 16, 10, 10});
  const ValueId s = b.quantize(x, 0.02f);
  ValueId r = b.quantize(b.relu(b.conv(s, 16, 16, 3)), 0.02f);
  r = b.quantize(b.conv(r, 16, 16, 3), 0.03f);
  ValueId sum = b.relu(b.g.add_node(Op::Add, "add", {b.dequantize(r), b.dequantize(s)}, 1)[0]);
  sum = b.quantize(sum, 0.03f);
  b.g.mark_output(b.conv(sum, 16, 32, 1));
  EXPECT_TRUE(b.g.topo_sort().ok());
  EXPECT_TRUE(b.g.infer_shapes().ok());
  return b.g;
}

TEST(Int8ConvSession, ResidualBlockMatchesCpuEagerAndReplayed) {
  const Graph g = residual_block();
  const NamedTensors in{{"x", randn({3, 16, 10, 10}, 7, 1.0f)}};
  SessionOptions oc;
  oc.device = "cpu";
  oc.precision = "int8";
  auto cpu = Session::from_graph(g, oc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  GPUOPT_REQUIRE_CUDA();
  SessionOptions og;
  og.device = "cuda";
  og.precision = "int8";
  setenv("GPUOPT_INT8_CONV", "1", 1);
  auto gpu = Session::from_graph(g, og);
  unsetenv("GPUOPT_INT8_CONV");
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  int convs = 0, adds = 0;
  for (const Node& n : (*gpu)->graph().nodes()) {
    convs += n.op_type == "Int8Conv";
    adds += n.op_type == "Int8Add";
  }
  EXPECT_EQ(convs, 3);
  // fuse_int8_residual (on by default) takes the add into the second conv; a 3x3 residual node is
  // not the CUTLASS 1x1 kernel's, so it runs as the conv + Int8Add pair inside the node.
  EXPECT_EQ(adds, 0);
  auto first = (*gpu)->run(in);  // eager: plans built, epilogue constants uploaded
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = (*gpu)->run(in);  // captured as a CUDA graph
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  // One-step flips of the int8 activations (GPU f32 epilogue vs the reference's f32 QDQ graph)
  // move the float output by a step times the last conv's gain.
  EXPECT_LT(rel_l2(first->at(0).second, want->at(0).second), 3e-2);
  expect_outputs_match(*first, *want, 5e-2);
  EXPECT_EQ(rel_l2(second->at(0).second, first->at(0).second), 0.0);  // deterministic replay
}

// The residual form on the GPU (cuDNN's residual graph, asked for by GPUOPT_INT8_CONV1X1=0; its
// int8 rounding done in f32) against the pair it replaces (GPUOPT_DISABLE_FUSION=int8_residual: the
// conv's int8 output, then Int8Add's kernel): x -> Q -> conv3x3 -> Q(c, 3 output steps per step); DQ(c) + DQ(Q(x)) ->
// Relu -> Q -> DQ (the output is the int8 codes times the scale). Both round in f32 from the same
// sums, so codes differ only where the last digits of two f32 formulas straddle a half: at most
// one step, in few places. Without the intermediate rounding most codes would move.
TEST(Int8ConvSession, FusedResidualMatchesThePairOnGpu) {
  GPUOPT_REQUIRE_CUDA();
  Qdq b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 32, 12, 12});
  const ValueId s = b.quantize(x, 0.02f);
  const ValueId c = b.quantize(b.conv(s, 32, 32, 3), 0.09f);
  ValueId sum = b.relu(b.g.add_node(Op::Add, "add", {b.dequantize(c), b.dequantize(s)}, 1)[0]);
  b.g.mark_output(b.dequantize(b.quantize(sum, 0.03f)));
  ASSERT_TRUE(b.g.topo_sort().ok());
  ASSERT_TRUE(b.g.infer_shapes().ok());
  const NamedTensors in{{"x", randn({4, 32, 12, 12}, 9, 1.0f)}};
  SessionOptions og;
  og.device = "cuda";
  og.precision = "int8";
  std::vector<Tensor> outs;
  for (bool fused : {true, false}) {
    og.kernels = KernelSettings{};  // the session's own settings, whatever the environment says
    if (!fused) og.kernels->disable_fusion = "int8_residual";
    if (fused) og.kernels->int8_conv1x1 = false;  // cuDNN's residual graph, not the pair
    auto gpu = Session::from_graph(b.g, og);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    int residual = 0, adds = 0;
    for (const Node& n : (*gpu)->graph().nodes()) {
      residual += n.op_type == "Int8Conv" && n.inputs.size() > 6;
      adds += n.op_type == "Int8Add";
    }
    EXPECT_EQ(residual, fused ? 1 : 0);
    EXPECT_EQ(adds, fused ? 0 : 1);
    auto r = (*gpu)->run(in);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    outs.push_back(r->at(0).second);
  }
  const Tensor& f = outs[0];
  const Tensor& p = outs[1];
  ASSERT_EQ(f.shape(), p.shape());
  int64_t off = 0, nonzero = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double d = std::abs(f.get_f64(i) - p.get_f64(i)) / 0.03;
    EXPECT_LE(d, 1.01) << i;
    off += d > 0.5;
    nonzero += p.get_f64(i) != 0;
  }
  EXPECT_LE(off * 100, f.numel()) << off << " of " << f.numel() << " codes differ";
  EXPECT_GT(nonzero * 4, f.numel());
}

// The epilogue constants from scales on the device equal the host's float arithmetic exactly
// (the session takes the host's for constant scales; both must give the same alpha/beta).
TEST(Int8ConvPrep, MatchesHostArithmetic) {
  GPUOPT_REQUIRE_CUDA();
  const int64_t m = 37;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(1e-3f, 5e-2f);
  std::vector<float> ws(m), bias(m);
  for (int64_t i = 0; i < m; ++i) {
    ws[static_cast<size_t>(i)] = u(rng);
    bias[static_cast<size_t>(i)] = u(rng) - 0.02f;
  }
  const float xs = 0.0213f, ys = 0.0429f, zs = 0.0371f, os = 0.0517f;
  for (bool half : {false, true}) {
    // Device copies of the scales in f32 or f16; the host's expectation from the same values.
    auto store = [&](const std::vector<float>& v) {
      void* p = nullptr;
      const size_t es = half ? 2 : 4;
      EXPECT_EQ(cudaMalloc(&p, v.size() * es), cudaSuccess);
      std::vector<unsigned char> bytes(v.size() * es);
      for (size_t i = 0; i < v.size(); ++i) {
        if (half) {
          const __half h = __float2half_rn(v[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        } else {
          std::memcpy(bytes.data() + 4 * i, &v[i], 4);
        }
      }
      EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
      return p;
    };
    auto rounded = [&](float v) { return half ? __half2float(__float2half_rn(v)) : v; };
    void* d_xs = store({xs});
    void* d_ws = store(ws);
    void* d_b = store(bias);
    void* d_ys = store({ys});
    void* d_zs = store({zs});
    void* d_os = store({os});
    float* d_ab = nullptr;
    ASSERT_EQ(cudaMalloc(&d_ab, (2 * m + cuda::kResidualFloats) * sizeof(float)), cudaSuccess);
    cuda::Int8ConvScales s;
    s.dt = half ? DType::F16 : DType::F32;
    s.x_scale = d_xs;
    s.w_scale = d_ws;
    s.w_per_channel = true;
    s.bias = d_b;
    s.y_scale = d_ys;
    s.z_scale = d_zs;  // the residual form's two scalars after beta
    s.out_scale = d_os;
    ASSERT_TRUE(cuda::launch_int8_conv_prep(s, m, d_ab, d_ab + m, nullptr).ok());
    std::vector<float> ab(2 * m + cuda::kResidualFloats);
    ASSERT_EQ(cudaMemcpy(ab.data(), d_ab, ab.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    const float inv = 1.0f / rounded(ys);
    for (int64_t c = 0; c < m; ++c) {
      EXPECT_EQ(ab[static_cast<size_t>(c)], rounded(xs) * rounded(ws[static_cast<size_t>(c)]) * inv) << c;
      EXPECT_EQ(ab[static_cast<size_t>(m + c)], rounded(bias[static_cast<size_t>(c)]) * inv) << c;
    }
    const float inv_o = 1.0f / rounded(os);
    EXPECT_EQ(ab[static_cast<size_t>(2 * m)], rounded(ys) * inv_o);
    EXPECT_EQ(ab[static_cast<size_t>(2 * m + 4)], rounded(zs) * inv_o);
    for (void* p : {d_xs, d_ws, d_b, d_ys, d_zs, d_os, static_cast<void*>(d_ab)}) cudaFree(p);
  }
}

}  // namespace
}  // namespace gpuopt::testing
