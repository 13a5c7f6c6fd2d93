// QBuilder: the QDQ graphs fold_qdq's tests build (per-tensor QuantizeLinear / DequantizeLinear
// of activations, int8 conv weights with a per-channel DequantizeLinear, BatchNormalization).
#pragma once

#include "cnn_graphs.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::test {

struct QBuilder : Builder {
  ValueId quantize(ValueId x, float scale, int64_t zero = 0) {
    std::string n = "quant";  // (+= : GCC 12's -Wrestrict misfires on "q" + std::string)
    n += std::to_string(next++);
    const ValueId s = g.add_constant(n + ".s", Tensor::scalar_f32(scale));
    const ValueId z = g.add_constant(n + ".z", Tensor::from_vector<int>(DType::I8, {}, {static_cast<int>(zero)}));
    return g.add_node(Op::QuantizeLinear, n, {x, s, z}, 1)[0];
  }
  ValueId dequantize(ValueId q) {
    const Node& qn = g.nodes()[static_cast<size_t>(g.value(q).producer)];
    const ValueId s = qn.inputs[1], z = qn.inputs[2];
    return g.add_node(Op::DequantizeLinear, g.value(q).name + "/dq", {q, s, z}, 1)[0];
  }
  // Conv(DQ(xq), DQ(W int8 [cout, cin/group, k, k], per channel)) [+ bias].
  ValueId conv(ValueId xq, int64_t cin, int64_t cout, int64_t k, int64_t pad, int64_t stride, bool bias,
               int64_t group = 1) {
    const std::string n = "conv" + std::to_string(next++);
    Tensor wq = Tensor::empty(DType::I8, {cout, cin / group, k, k});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    const float r = 1.7f / std::sqrt(static_cast<float>(cin / group * k * k)) / 127.0f;
    AttributeMap ax;
    ax["axis"].i = 0;  // an Attribute is an int by default
    const ValueId wd =
        g.add_node(Op::DequantizeLinear, n + "/dqw",
                   {g.add_constant(n + ".wq", wq), g.add_constant(n + ".ws", random_tensor({cout}, rng, 0.5f * r, r)),
                    g.add_constant(n + ".wz", Tensor::zeros(DType::I8, {cout}))},
                   1, ax)[0];
    std::vector<ValueId> in{dequantize(xq), wd};
    if (bias) in.push_back(g.add_constant(n + ".b", random_tensor({cout}, rng, -0.3f, 0.3f)));
    AttributeMap a = test::conv_attrs(k, pad, stride);
    if (group != 1) a["group"].i = group;
    return g.add_node(Op::Conv, n, in, 1, a)[0];
  }
  ValueId batchnorm(ValueId x, int64_t c) {
    const std::string n = "batchnorm" + std::to_string(next++);
    Tensor gamma = random_tensor({c}, rng, 0.3f, 1.5f);
    for (int64_t i = 0; i < c; i += 2) gamma.set_f64(i, -gamma.get_f64(i));  // negative scales too
    return g.add_node(Op::BatchNormalization, n,
                      {x, g.add_constant(n + ".gamma", gamma),
                       g.add_constant(n + ".beta", random_tensor({c}, rng, -0.3f, 0.3f)),
                       g.add_constant(n + ".mean", random_tensor({c}, rng, -0.2f, 0.2f)),
                       g.add_constant(n + ".var", random_tensor({c}, rng, 0.5f, 2.0f))},
                      1)[0];
  }
};


}  // namespace gpuopt::test
