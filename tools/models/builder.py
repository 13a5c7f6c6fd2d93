"""A tiny graph builder over onnx.helper: named nodes, seeded weights, dynamic batch.

    b = Builder("resnet18", seed=0)
    x = b.input("input", [ "batch", 3, 64, 64 ])
    y = b.relu(b.conv(x, 3, 16, k=3))
    b.output(y, "logits")
    b.save("resnet18.onnx")
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # what a current torch.onnx export of these models uses


class Builder:
    def __init__(self, name, seed=0, opset=OPSET):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.opset = opset
        self.count = {}

    # -- naming / values ------------------------------------------------------------------------
    def fresh(self, prefix):
        k = self.count.get(prefix, 0)
        self.count[prefix] = k + 1
        return f"{prefix}_{k}"

    def const(self, array, prefix="c"):
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def i64(self, values):
        return self.const(np.asarray(values, dtype=np.int64), "shape")

    def f32(self, values):
        return self.const(np.asarray(values, dtype=np.float32), "scalar")

    def weight(self, shape, fan_in, prefix="w", gain=2.0):
        w = self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)
        return self.const(w.astype(np.float32), prefix)

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def input(self, name, shape, dtype=TensorProto.FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def output(self, value, name, dtype=TensorProto.FLOAT):
        self.nodes.append(helper.make_node("Identity", [value], [name], name=self.fresh("out")))
        self.outputs.append(helper.make_tensor_value_info(name, dtype, None))

    def model(self):
        # Outputs get their (symbolic) shapes from ONNX's own shape inference.
        g = helper.make_graph(self.nodes, self.name, self.inputs, [], self.inits)
        probe = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(probe).graph.value_info}
        outs = []
        for o in self.outputs:
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(inferred.get(o.name, o))
            outs.append(vi)
        g = helper.make_graph(self.nodes, self.name, self.inputs, outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="gpuopt-tools")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m

    def save(self, path):
        m = self.model()
        onnx.save(m, path)
        return path

    # -- layers ---------------------------------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, group=1, bias=False):
        w = self.weight([cout, cin // group, k, k], fan_in=cin // group * k * k)
        ins = [x, w]
        if bias:
            ins.append(self.const((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        p = k // 2
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=group)

    def bn(self, x, c, gamma=1.0):
        scale = self.const((gamma * (1.0 + 0.1 * self.rng.standard_normal(c))).astype(np.float32), "bn_scale")
        bias = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_bias")
        mean = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_mean")
        var = self.const((1.0 + 0.2 * self.rng.random(c)).astype(np.float32), "bn_var")
        return self.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)

    def relu(self, x):
        return self.op("Relu", [x])

    def linear(self, x, din, dout, gain=1.0):
        """x @ W + b (MatMul + Add, as torch exports nn.Linear on 3-D inputs)."""
        w = self.weight([din, dout], fan_in=din, gain=gain)
        b = self.const((0.02 * self.rng.standard_normal(dout)).astype(np.float32), "b")
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x, d):
        g = self.const((1.0 + 0.1 * self.rng.standard_normal(d)).astype(np.float32), "ln_g")
        b = self.const((0.1 * self.rng.standard_normal(d)).astype(np.float32), "ln_b")
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)

    def gelu_erf(self, x):
        """Exact GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        e = self.op("Erf", [self.op("Div", [x, self.f32(np.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.f32(1.0)])]), self.f32(0.5)])

    def gelu_tanh(self, x):
        """GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        x3 = self.op("Pow", [x, self.f32(3.0)])
        inner = self.op("Mul", [self.op("Add", [x, self.op("Mul", [x3, self.f32(0.044715)])]),
                                self.f32(np.sqrt(2.0 / np.pi))])
        t = self.op("Add", [self.op("Tanh", [inner]), self.f32(1.0)])
        return self.op("Mul", [self.op("Mul", [x, t]), self.f32(0.5)])
