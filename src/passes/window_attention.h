// Swin's window forms. unfold_window_attention (window_attention.cpp): shifted-window attention (a
// per-window shift mask added to the scores between two Reshapes) rewritten with the windows among
// the heads and bias + mask as one constant, the form fuse_attention fuses; fuse_attention runs it
// first. rolls_as_gathers (roll.cpp): the cyclic shift as one copy; space_to_depth_as_transpose
// (space_to_depth.cpp): the patch merging as one copy.
//
//   GPUOPT_ASSIGN_OR_RETURN(PassStats s, unfold_window_attention(&graph));  // then fuse_attention
//   GPUOPT_ASSIGN_OR_RETURN(PassStats r, rolls_as_gathers(&graph));
#pragma once

#include "passes/passes.h"

#include <optional>
#include <vector>

namespace gpuopt {

Result<PassStats> unfold_window_attention(Graph* g);

// Shapes re-inferred in order, keeping what was known, with a Reshape whose target is a Concat of
// one-element pieces given the dims its constant pieces fix (torch.onnx's legacy exporter writes
// the window partition's and the head split's targets so: [B * nW from a Shape, N, 3, H, d]).
// Refines value infos only; the next infer_shapes drops what it cannot derive itself.
Status refine_reshape_shapes(Graph* g);

// An Attention reading Q, K and V as Gathers 0, 1, 2 of Transpose(Reshape(qkv, [S0, S1, 3, H, d]),
// [2, 0, 3, 1, 4]) and merged back by Transpose [0, 2, 1, 3] + Reshape reads qkv in place
// (qkv_packed=1) and writes the merged output (packed_qkv.cpp); fuse_attention runs it last.
Result<PassStats> attention_reads_packed_qkv(Graph* g);

// torch.roll as exported (Concat of the two Slices of one axis) becomes one Gather by a constant
// index map; rolls on two adjacent axes become one Gather over them flattened (roll.cpp).
Result<PassStats> rolls_as_gathers(Graph* g);

// Concat of the four parity Slices of two axes (x[.., 0::2, 0::2, ..], [1::2, 0::2], ...: Swin's
// patch merging, YOLOv5's Focus) becomes Reshape -> Transpose -> Reshape: one copy
// (space_to_depth.cpp).
Result<PassStats> space_to_depth_as_transpose(Graph* g);

// A Slice's starts/ends/axes/steps when they are constants (axes made non-negative, defaults
// filled in), else nullopt.
struct ConstSlice {
  std::vector<int64_t> starts, ends, axes, steps;
};
std::optional<ConstSlice> constant_slice(const Graph& g, const Node& n);

}  // namespace gpuopt
