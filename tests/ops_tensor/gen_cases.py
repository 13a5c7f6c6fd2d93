#!/usr/bin/env python3
"""Generates the ONNX Runtime oracle cases for tests/ops_tensor/cases_test.cpp.

Each case is one single-node ONNX model run by onnxruntime on fresh random inputs (shapes mix
powers of two and odd sizes); the inputs and ORT's outputs are stored as .npy files in
tests/ops_tensor/data/<case>/ next to case.json (op, opset, attributes, file names).

    .venv/bin/python tests/ops_tensor/gen_cases.py      # rewrites tests/ops_tensor/data/
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ort_case_gen import case, main  # noqa: E402

OUT = Path(__file__).resolve().parent / "data"
rng = np.random.default_rng(20261122)


def rand(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = (0, 200) if dtype.kind == "u" else (-100, 100)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def i64(*v):
    return np.array(v, dtype=np.int64)


def define():
    # Shape ops
    case("reshape_zero_neg", "Reshape", [rand((4, 6, 5)), i64(0, -1)])
    case("reshape_i64_infer", "Reshape", [rand((2, 3, 8), np.int64), i64(4, -1, 3)])
    case("reshape_f16_flat", "Reshape", [rand((8, 1, 7), np.float16), i64(-1)])
    case("reshape_allowzero", "Reshape", [rand((0, 3)), i64(3, 0)], allowzero=1, opset=14)
    case("flatten_axis0", "Flatten", [rand((2, 3, 4, 5), np.uint8)], axis=0)
    case("flatten_axis2", "Flatten", [rand((2, 3, 4, 5))], axis=2)
    case("flatten_neg", "Flatten", [rand((3, 1, 7), np.int32)], axis=-1)
    case("squeeze_axes_input", "Squeeze", [rand((3, 1, 5, 1)), i64(1, -1)], opset=13)
    case("squeeze_attr", "Squeeze", [rand((1, 4, 1), np.int8)], axes=[0], opset=11)
    case("squeeze_all", "Squeeze", [rand((1, 7, 1, 2))], opset=13)
    case("unsqueeze_input", "Unsqueeze", [rand((3, 5), np.float16), i64(0, -1)], opset=13)
    case("unsqueeze_attr", "Unsqueeze", [rand((3, 5), np.bool_)], axes=[1, 3], opset=11)
    case("shape_start_end", "Shape", [rand((2, 3, 4, 5))], start=1, end=-1, opset=15)
    case("shape_clip", "Shape", [rand((2, 3, 4))], start=-10, opset=15)
    case("size", "Size", [rand((3, 5, 7))])
    case("identity_bool", "Identity", [rand((5, 8), np.bool_)])
    case("dropout_mask", "Dropout", [rand((4, 9)), np.array(0.3, np.float32), np.array(False)], n_out=2, opset=13)
    # Layout
    case("transpose_0231", "Transpose", [rand((2, 3, 4, 5))], perm=[0, 2, 3, 1])
    case("transpose_default_i8", "Transpose", [rand((3, 4, 5), np.int8)])
    case("transpose_f16", "Transpose", [rand((16, 1, 7), np.float16)], perm=[2, 0, 1])
    case("concat_axis1_i64", "Concat", [rand((2, 3, 4), np.int64), rand((2, 1, 4), np.int64), rand((2, 5, 4), np.int64)], axis=1)
    case("concat_neg_f32", "Concat", [rand((3, 8)), rand((3, 7))], axis=-1)
    case("concat_empty", "Concat", [rand((2, 0)), rand((2, 3))], axis=1)
    case("split_input", "Split", [rand((3, 8, 2)), i64(2, 5, 1)], n_out=3, axis=1, opset=13)
    case("split_num_outputs", "Split", [rand((8, 3), np.int32)], n_out=3, num_outputs=3, opset=18)
    case("split_attr", "Split", [rand((7, 4))], n_out=2, split=[3, 4], opset=11)
    case("split_equal", "Split", [rand((4, 6), np.uint8)], n_out=3, axis=-1, opset=13)
    case("slice_steps", "Slice", [rand((6, 5, 9)), i64(1, -1), i64(1000, -8), i64(0, 2), i64(2, -2)], opset=13)
    case("slice_neg_step_all", "Slice", [rand((7, 4), np.int64), i64(-1), i64(-1000), i64(0), i64(-1)], opset=13)
    case("slice_default_axes", "Slice", [rand((5, 6), np.float16), i64(1, 2), i64(4, 100)], opset=13)
    case("slice_opset9", "Slice", [rand((4, 10))], starts=[1, -3], ends=[3, 1000], axes=[0, 1], opset=9)
    case("slice_empty", "Slice", [rand((4, 5)), i64(3), i64(1), i64(0)], opset=13)
    case("tile_f16", "Tile", [rand((2, 3, 4), np.float16), i64(2, 1, 3)])
    case("tile_bool", "Tile", [rand((1, 5), np.bool_), i64(3, 2)])
    case("pad_constant", "Pad", [rand((3, 5)), i64(1, 2, 0, 3), np.array(1.5, np.float32)], mode="constant", opset=13)
    case("pad_reflect", "Pad", [rand((2, 4, 5)), i64(0, 2, 3, 0, 1, 4)], mode="reflect", opset=13)
    case("pad_edge_i64", "Pad", [rand((3, 4), np.int64), i64(2, 1, 1, 3)], mode="edge", opset=13)
    case("pad_wrap", "Pad", [rand((3, 4)), i64(1, 2, 2, 3)], mode="wrap", opset=19)
    case("pad_axes", "Pad", [rand((2, 3, 4)), i64(1, -1, 2, 1), np.array(-2.0, np.float32), i64(0, -1)], opset=18)
    case("pad_negative", "Pad", [rand((5, 6), np.int32), i64(-1, 2, 1, -3)], opset=13)
    case("pad_opset2", "Pad", [rand((3, 4))], pads=[1, 0, 0, 2], value=0.25, opset=2)
    case("depthtospace_dcr", "DepthToSpace", [rand((2, 8, 3, 5))], blocksize=2, mode="DCR")
    case("depthtospace_crd", "DepthToSpace", [rand((1, 18, 2, 3), np.float16)], blocksize=3, mode="CRD")
    case("spacetodepth", "SpaceToDepth", [rand((2, 3, 4, 6))], blocksize=2)
    case("trilu_upper_k1", "Trilu", [rand((2, 5, 7)), np.array(1, np.int64)], upper=1, opset=14)
    case("trilu_lower_neg", "Trilu", [rand((3, 8, 4), np.int64), np.array(-1, np.int64)], upper=0, opset=14)
    case("trilu_default", "Trilu", [rand((6, 6))], opset=14)
    case("expand_rank_up", "Expand", [rand((3, 1)), i64(2, 1, 6)])
    case("expand_i64", "Expand", [rand((1,), np.int64), i64(4, 5)])
    case("expand_keep", "Expand", [rand((2, 1, 4), np.float16), i64(1, 3, 1)])
    # Creation
    case("constant_tensor", "Constant", [], value=rand((3, 5)))
    case("constant_value_ints", "Constant", [], value_ints=[4, -1, 7])
    case("constant_value_float", "Constant", [], value_float=2.5)
    case("constantofshape_i64", "ConstantOfShape", [i64(2, 3, 5)], value=np.array([7], np.int64))
    case("constantofshape_default", "ConstantOfShape", [i64(4, 1)])
    case("constantofshape_empty", "ConstantOfShape", [i64(3, 0)], value=np.array([1.5], np.float16))
    case("range_f32", "Range", [np.array(-1.5, np.float32), np.array(7.25, np.float32), np.array(0.75, np.float32)])
    case("range_i64_neg", "Range", [np.array(10, np.int64), np.array(-7, np.int64), np.array(-3, np.int64)])
    case("range_i32_empty", "Range", [np.array(5, np.int32), np.array(1, np.int32), np.array(2, np.int32)])
    case("cast_f32_f16", "Cast", [rand((5, 7))], to=10)
    case("cast_f16_f32", "Cast", [rand((4, 8), np.float16)], to=1)
    case("cast_f32_i32", "Cast", [rand((3, 9))], to=6)
    case("cast_i64_f32", "Cast", [rand((16,), np.int64)], to=1)
    case("cast_f32_bool", "Cast", [np.array([0.0, -0.0, 1.5, -2.0, 0.25, np.inf], np.float32)], to=9)
    case("cast_bool_f32", "Cast", [rand((3, 5), np.bool_)], to=1)
    case("cast_u8_f64", "Cast", [rand((2, 7), np.uint8)], to=11)
    case("cast_i32_i8", "Cast", [rng.integers(-128, 127, (4, 5)).astype(np.int32)], to=3)
    case("cast_f64_f16", "Cast", [rand((6, 5), np.float64)], to=10)
    case("castlike_f32_i64", "CastLike", [rand((4, 3)), np.zeros((1,), np.int64)], opset=15)
    # Indexing
    case("gather_axis1_neg", "Gather", [rand((3, 5, 4), np.int64), np.array([[0, -1], [4, 2], [-5, 1]], np.int64)], axis=1)
    case("gather_scalar_idx", "Gather", [rand((7, 3)), np.array(-2, np.int64)], axis=0)
    case("gather_i32_idx_f16", "Gather", [rand((2, 9), np.float16), np.array([8, 0, 3, 3], np.int32)], axis=-1)
    case("gatherelements", "GatherElements", [rand((4, 5)), rng.integers(-5, 5, (4, 3)).astype(np.int64)], axis=1)
    case("gatherelements_axis0", "GatherElements", [rand((3, 2, 4), np.int32), rng.integers(0, 3, (5, 2, 4)).astype(np.int64)], axis=0)
    case("gathernd", "GatherND", [rand((4, 5, 3)), np.array([[1, 2], [3, -1], [0, 0]], np.int64)])
    case("gathernd_batch1", "GatherND", [rand((2, 5, 3, 4)), rng.integers(0, 3, (2, 6, 2)).astype(np.int64)], batch_dims=1)
    case("scatternd", "ScatterND", [rand((6, 4)), np.array([[4], [0], [2]], np.int64), rand((3, 4))], opset=16)
    case("scatternd_add", "ScatterND", [rand((5, 3, 2)), np.array([[1, 2], [1, 2], [4, 0]], np.int64), rand((3, 2))], reduction="add", opset=16)
    case("scatternd_mul_i64", "ScatterND", [rand((4, 3), np.int64), np.array([[1], [1]], np.int64), rand((2, 3), np.int64)], reduction="mul", opset=16)
    case("scatterelements", "ScatterElements", [rand((4, 6)), np.array([[1, 0, 5], [2, -1, 3]], np.int64), rand((2, 3))], axis=1, opset=16)
    case("scatterelements_max", "ScatterElements", [rand((3, 5)), np.array([[0, 0], [2, 2], [1, 1]], np.int64), rand((3, 2))], axis=1, reduction="max", opset=18)
    case("scatterelements_min_axis0", "ScatterElements", [rand((3, 4), np.int32), np.array([[2, 0, 1, 2], [2, 0, 0, 1]], np.int64), rand((2, 4), np.int32)], axis=0, reduction="min", opset=18)
    x = rand((3, 5, 4))
    x[np.abs(x) < 2.5] = 0
    case("nonzero_f32", "NonZero", [x])
    case("nonzero_bool", "NonZero", [rand((7, 3), np.bool_)])
    case("topk_largest", "TopK", [rand((3, 9)), i64(4)], n_out=2)
    case("topk_smallest_axis0", "TopK", [rand((8, 5)), i64(3)], n_out=2, axis=0, largest=0)
    case("topk_ties_i64", "TopK", [rng.integers(0, 4, (5, 16)).astype(np.int64), i64(7)], n_out=2, axis=1)
    # Resize (ORT's implementation as the oracle, tolerance-compared)
    f32 = np.float32
    case("resize_nearest_ceil_up", "Resize", [rand((1, 2, 3, 5)), None, np.array([1, 1, 2.5, 1.6], f32)],
         mode="nearest", nearest_mode="round_prefer_ceil", opset=19)
    case("resize_nearest_floor_asym_u8", "Resize", [rand((2, 3, 4, 4), np.uint8), None, np.array([1, 1, 1.5, 3], f32)],
         mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric", opset=19)
    case("resize_linear_align_sizes", "Resize", [rand((1, 3, 7, 8)), None, None, i64(1, 3, 4, 5)],
         mode="linear", coordinate_transformation_mode="align_corners", opset=19)
    case("resize_linear_half_pixel_up", "Resize", [rand((2, 1, 4, 3)), None, np.array([1, 1, 2, 3], f32)], mode="linear", opset=19)
    case("resize_linear_pytorch_sizes", "Resize", [rand((1, 2, 5, 9)), None, None, i64(1, 2, 1, 4)],
         mode="linear", coordinate_transformation_mode="pytorch_half_pixel", opset=19)
    case("resize_cubic_exclude", "Resize", [rand((1, 1, 6, 7)), None, np.array([1, 1, 1.7, 0.6], f32)],
         mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1, opset=19)
    case("resize_cubic_asym_f16", "Resize", [rand((1, 2, 4, 4), np.float16), None, np.array([1, 1, 2, 2], f32)],
         mode="cubic", coordinate_transformation_mode="asymmetric", opset=19)
    case("resize_linear_antialias_down", "Resize", [rand((1, 2, 16, 12)), None, np.array([1, 1, 0.3, 0.5], f32)],
         mode="linear", antialias=1, opset=19)
    case("resize_cubic_antialias_down", "Resize", [rand((1, 1, 9, 16)), None, None, i64(1, 1, 4, 5)],
         mode="cubic", antialias=1, opset=19)
    case("resize_tf_crop", "Resize", [rand((1, 1, 8, 7)), np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], f32), None, i64(1, 1, 5, 6)],
         mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0, opset=19)
    case("resize_keep_aspect_axes", "Resize", [rand((2, 3, 10, 6)), None, None, i64(5, 5)],
         mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_larger", opset=19)
    case("resize_opset11_linear", "Resize", [rand((1, 1, 3, 5)), np.zeros((0,), f32), np.array([1, 1, 2, 0.5], f32)],
         mode="linear", opset=11)
    case("resize_opset10_nearest", "Resize", [rand((1, 2, 3, 4)), np.array([1, 1, 2, 3], f32)], mode="nearest", opset=10)
    case("upsample_nearest", "Upsample", [rand((1, 2, 3, 2)), np.array([1, 1, 3, 2], f32)], mode="nearest", opset=9)
    case("topk_f16", "TopK", [rand((2, 7, 3), np.float16), i64(2)], n_out=2, axis=1)


if __name__ == "__main__":
    main(define, OUT)
