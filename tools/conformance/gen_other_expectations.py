#!/usr/bin/env python3
"""Writes tools/conformance/expectations/other.txt: node tests gpuopt does not aim to pass.

  .venv/bin/python tools/conformance/gen_other_expectations.py   # rewrites other.txt

A test is listed when its model uses an op outside gpuopt's op list (the issue's list plus
whatever src/ir/ops_*.inc declares), a dtype gpuopt has no type for (complex), a non-tensor
value (sequence, map, optional), or an opset older than 7. Ops in the list
that fail are the kernel owners' business (nn.txt, math.txt, tensor.txt), not this file's.
"""
import glob
import os
import re
import sys

import onnx
from onnx import TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The op list of issue 3 (engine core); src/ir/ops_*.inc may add more.
ISSUE_OPS = """Conv ConvTranspose BatchNormalization InstanceNormalization GroupNormalization LayerNormalization
MaxPool AveragePool GlobalAveragePool GlobalMaxPool Gemm MatMul Einsum Relu LeakyRelu PRelu Elu Selu Sigmoid
HardSigmoid HardSwish Tanh Softplus Gelu Erf Clip Softmax LogSoftmax Add Sub Mul Div Pow Sqrt Exp Log Neg Abs
Reciprocal Floor Ceil Round Sign Sin Cos Min Max Mean Sum Mod Equal Less LessOrEqual Greater GreaterOrEqual And
Or Xor Not Where ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL2 ReduceSumSquare ArgMax ArgMin TopK
CumSum Reshape Flatten Transpose Squeeze Unsqueeze Concat Split Slice Gather GatherElements GatherND ScatterND
ScatterElements Expand Tile Pad Resize Cast Shape Size Constant ConstantOfShape Range Identity Dropout Trilu
NonZero DepthToSpace SpaceToDepth IsNaN IsInf QuantizeLinear DequantizeLinear MatMulInteger QLinearMatMul
QLinearConv""".split()

# DType in src/core/dtype.h mirrors these ONNX types; everything else has no gpuopt type.
SUPPORTED_DTYPES = {TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16,
                    TensorProto.INT32, TensorProto.INT64, TensorProto.STRING, TensorProto.BOOL, TensorProto.FLOAT16,
                    TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BFLOAT16,
                    TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
                    TensorProto.FLOAT8E5M2FNUZ, TensorProto.UINT4, TensorProto.INT4, TensorProto.FLOAT4E2M1,
                    TensorProto.FLOAT8E8M0, TensorProto.UINT2, TensorProto.INT2}
MIN_OPSET = 7
DOMAIN_OPS = set()


def domain_ops():
    """(domain, op) pairs the importer reads outside the default domain (kDomainOps)."""
    text = open(os.path.join(ROOT, "src/onnx/model_import.cpp")).read()
    return set(re.findall(r'\{"([\w.]+)", "(\w+)"\}', text))


def table_ops():
    ops = set(ISSUE_OPS)
    for inc in glob.glob(os.path.join(ROOT, "src/ir/ops_*.inc")):
        text = open(inc).read()
        ops.update(re.findall(r"\bX\((\w+)\)", text))
    ops.discard("Name")  # the example in the header comment
    return ops


def dtype_name(t):
    return TensorProto.DataType.Name(t)


def reason_for(model, ops):
    g = model.graph
    for n in g.node:
        if n.domain not in ("", "ai.onnx") and (n.domain, n.op_type) not in DOMAIN_OPS:
            return f"not implemented: op {n.op_type} of domain {n.domain} not in gpuopt's op list"
        if n.op_type not in ops:
            return f"not implemented: op {n.op_type} not in gpuopt's op list"
    for v in list(g.input) + list(g.output):
        t = v.type
        if t.HasField("optional_type") and t.optional_type.elem_type.HasField("tensor_type"):
            t = t.optional_type.elem_type  # gpuopt reads an optional tensor as the tensor
        if not t.HasField("tensor_type"):
            kind = t.WhichOneof("value") or "untyped"
            return f"not supported: {kind.replace('_type', '')} values (gpuopt runs tensors only)"
        if t.tensor_type.elem_type not in SUPPORTED_DTYPES:
            return f"not supported: dtype {dtype_name(t.tensor_type.elem_type)} is not one of gpuopt's dtypes"
    tensors = list(g.initializer) + [a.t for n in g.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    for t in tensors:
        if t.data_type not in SUPPORTED_DTYPES:
            return f"not supported: dtype {dtype_name(t.data_type)} is not one of gpuopt's dtypes"
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "output_dtype", "dtype") and a.type == onnx.AttributeProto.INT and a.i not in SUPPORTED_DTYPES:
                return f"not supported: dtype {dtype_name(a.i)} is not one of gpuopt's dtypes"
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version < MIN_OPSET:
            return f"not supported: opset {o.version} is older than gpuopt's minimum {MIN_OPSET}"
    return None


def main():
    data = glob.glob(os.path.join(ROOT, ".venv/lib/python3*/site-packages/onnx/backend/test/data/node"))
    if not data:
        sys.exit("no onnx node tests under .venv")
    ops = table_ops()
    DOMAIN_OPS.update(domain_ops())
    lines = []
    for d in sorted(glob.glob(os.path.join(data[0], "test_*"))):
        model = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        r = reason_for(model, ops)
        if r:
            lines.append(f"{os.path.basename(d)}  {r}")
    out = os.path.join(ROOT, "tools/conformance/expectations/other.txt")
    with open(out, "w") as f:
        f.write("# Node tests of ops, dtypes or value kinds outside gpuopt's scope. Generated by\n"
                "# tools/conformance/gen_other_expectations.py (onnx " + onnx.__version__ + "); do not edit by hand.\n")
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {len(lines)} tests")


if __name__ == "__main__":
    main()
