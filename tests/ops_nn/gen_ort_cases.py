#!/usr/bin/env python3
"""Generates ONNX Runtime oracle cases for tests/ops_nn/ort_cases_test.cpp.

Configurations the ONNX node tests do not cover (groups with dilations and SAME_LOWER, 3-D,
ConvTranspose with groups and output_shape, pools with ceil_mode + dilations + count_include_pad,
Einsum equations, LayerNormalization axes, per-channel QLinearConv, ...). Each case is one
single-node model run by onnxruntime on fresh random inputs (shapes mix powers of two and odd
sizes); inputs and ORT's outputs are stored as .npy in tests/ops_nn/data/<case>/ with case.json.

    .venv/bin/python tests/ops_nn/gen_ort_cases.py      # rewrites tests/ops_nn/data/
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ort_case_gen import case, main  # noqa: E402

OUT = Path(__file__).resolve().parent / "data"
rng = np.random.default_rng(20261122)


def rand(shape, dtype=np.float32, lo=None, hi=None):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def pos(shape, lo=0.5, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def scalar(v, dtype):
    return np.array(v, dtype=dtype)


def define():
    # Conv
    case("conv_group_dilation_same_lower", "Conv", [rand((2, 6, 13, 8)), rand((9, 2, 3, 2)), rand((9,))],
         group=3, strides=[2, 3], auto_pad="SAME_LOWER")  # ORT rejects dilations with SAME_*
    case("conv_group_dilation_pads", "Conv", [rand((2, 6, 13, 8)), rand((9, 2, 3, 2)), rand((9,))],
         group=3, dilations=[2, 3], strides=[2, 1], pads=[2, 1, 0, 3])
    case("conv_3d_strided", "Conv", [rand((1, 3, 7, 8, 5)), rand((4, 3, 3, 2, 3))], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])
    case("conv_1d_depthwise", "Conv", [rand((3, 16, 33)), rand((16, 1, 5)), rand((16,))], group=16, pads=[2, 2])
    case("conv_valid_1x1", "Conv", [rand((2, 64, 7, 9)), rand((32, 64, 1, 1))], auto_pad="VALID")
    case("convtranspose_group_outshape", "ConvTranspose", [rand((1, 4, 5, 6)), rand((4, 3, 3, 3)), rand((6,))],
         group=2, strides=[2, 3], output_shape=[12, 18])
    case("convtranspose_dilation_outpad", "ConvTranspose", [rand((2, 3, 4, 7)), rand((3, 2, 3, 2))],
         strides=[3, 2], dilations=[2, 1], pads=[1, 0, 2, 1], output_padding=[1, 1])
    case("convtranspose_1d_same_lower", "ConvTranspose", [rand((1, 2, 9)), rand((2, 5, 4))], strides=[2], auto_pad="SAME_LOWER")
    # Pools
    case("maxpool_3d_ceil_dil_idx", "MaxPool", [rand((1, 2, 7, 8, 9))], n_out=2, kernel_shape=[2, 3, 2],
         strides=[2, 2, 3], dilations=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1], ceil_mode=1)
    case("maxpool_i8_same_upper", "MaxPool", [rand((2, 3, 9, 10), np.int8)], kernel_shape=[3, 3], strides=[2, 2],
         auto_pad="SAME_UPPER", opset=12)
    case("avgpool_ceil_include_pad", "AveragePool", [rand((2, 3, 10, 11))], kernel_shape=[3, 4], strides=[3, 2],
         pads=[1, 2, 1, 1], ceil_mode=1, count_include_pad=1, opset=19)
    case("avgpool_dilations_exclude_pad", "AveragePool", [rand((1, 4, 12, 9))], kernel_shape=[3, 2], strides=[2, 1],
         dilations=[2, 3], pads=[2, 1, 1, 1], opset=19)
    case("globalavgpool_3d", "GlobalAveragePool", [rand((2, 5, 3, 4, 7))])
    case("globalmaxpool_1d", "GlobalMaxPool", [rand((3, 8, 17))])
    # Norms
    case("batchnorm_3d", "BatchNormalization", [rand((2, 5, 3, 4, 6)), rand((5,)), rand((5,)), rand((5,)), pos((5,))],
         epsilon=1e-3, opset=15)
    case("instancenorm_1d", "InstanceNormalization", [rand((3, 7, 33)), rand((7,)), rand((7,))], epsilon=1e-4)
    case("groupnorm_21", "GroupNormalization", [rand((2, 12, 5, 3)), rand((12,)), rand((12,))], num_groups=4, opset=21)
    case("layernorm_axis1_stats", "LayerNormalization", [rand((3, 4, 5, 6)), rand((4, 5, 6)), rand((4, 5, 6))],
         n_out=3, axis=1, epsilon=1e-4)
    case("layernorm_bert", "LayerNormalization", [rand((2, 7, 96)), rand((96,)), rand((96,))], n_out=1, axis=-1)
    # MatMul family
    case("matmul_bcast_4d", "MatMul", [rand((2, 1, 5, 16)), rand((3, 16, 7))])
    case("matmul_vec_batched", "MatMul", [rand((9,)), rand((4, 9, 6))])
    case("gemm_trans_bias_row", "Gemm", [rand((33, 8)), rand((17, 33)), rand((1, 17))], transA=1, transB=1, alpha=0.5, beta=2.0)
    case("einsum_attention", "Einsum", [rand((2, 3, 5, 8)), rand((2, 3, 7, 8))], equation="bhqd,bhkd->bhqk", opset=12)
    case("einsum_three_operands", "Einsum", [rand((3, 4)), rand((4, 5)), rand((5, 2))], equation="ij,jk,kl->il", opset=12)
    case("einsum_ellipsis_trace", "Einsum", [rand((2, 3, 4, 4))], equation="...ii->...i", opset=12)
    case("einsum_implicit_outer", "Einsum", [rand((3,)), rand((5,))], equation="i,j", opset=12)
    # Quantized
    case("quantize_axis0_i8", "QuantizeLinear", [rand((4, 9)) * 20, pos((4,), 0.05, 0.2), rand((4,), np.int8, -10, 10)],
         axis=0, opset=13)
    case("dequantize_axis_u8", "DequantizeLinear", [rand((3, 5, 4), np.uint8), pos((5,), 0.01, 0.1),
                                                    rand((5,), np.uint8, 100, 150)], axis=1, opset=13)
    case("matmulinteger_zp", "MatMulInteger", [rand((2, 5, 11), np.uint8), rand((11, 6), np.uint8),
                                               scalar(131, np.uint8), scalar(120, np.uint8)], opset=10)
    case("qlinearmatmul_i8", "QLinearMatMul", [rand((4, 13), np.int8), scalar(0.02, np.float32), scalar(3, np.int8),
                                               rand((13, 6), np.int8), scalar(0.03, np.float32), scalar(-2, np.int8),
                                               scalar(0.15, np.float32), scalar(5, np.int8)], opset=10)
    case("qlinearconv_per_channel", "QLinearConv",
         [rand((1, 4, 9, 8), np.uint8), scalar(0.02, np.float32), scalar(128, np.uint8),
          rand((6, 4, 3, 3), np.int8, -60, 60), pos((6,), 0.002, 0.01), np.zeros((6,), np.int8),
          scalar(0.08, np.float32), scalar(120, np.uint8), rand((6,), np.int32, -300, 300)],
         pads=[1, 1, 1, 1], strides=[2, 1], opset=10)


if __name__ == "__main__":
    main(define, OUT)
