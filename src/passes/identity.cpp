#include "passes/passes.h"
#include "passes/window_attention.h"

#include <algorithm>
#include <optional>

namespace gpuopt {
namespace {

// Dropout is the identity at inference unless training_mode is given and may be true.
bool dropout_is_identity(const Graph& g, const Node& n) {
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;  // mask is used
  if (n.inputs.size() < 3 || n.inputs[2] == kNoValue) return true;
  const Value& tm = g.value(n.inputs[2]);
  return tm.constant && tm.constant->numel() == 1 && tm.constant->get_f64(0) == 0.0;
}

bool has_perm(const Node& n) { return n.has_attr("perm"); }

// The int64 values of input i when it is a constant (nullopt: absent or computed at run time).
std::optional<std::vector<int64_t>> const_input(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return std::nullopt;
  const Value& v = g.value(n.inputs[i]);
  if (!v.constant) return std::nullopt;
  return v.constant->to_i64_vector();
}

// A Pad whose pads are all zero copies its input, whatever the mode (torchvision's Swin pads
// the feature map to a multiple of the window: zero for 224x224 images).
bool pad_is_identity(const Graph& g, const Node& n) {
  std::optional<std::vector<int64_t>> pads;
  if (n.has_attr("pads")) {
    pads = n.attr_ints("pads");
  } else if (n.has_attr("paddings")) {
    pads = n.attr_ints("paddings");
  } else {
    pads = const_input(g, n, 1);
  }
  return pads && std::all_of(pads->begin(), pads->end(), [](int64_t p) { return p == 0; });
}

// A Slice that keeps every element in order: on every sliced axis step 1 from 0 to the end (a
// known dim, or an end past any extent when the dim is symbolic). torchvision's Swin crops the
// window padding off with x[:, :H, :W, :]: nothing to crop when nothing was padded.
bool slice_is_identity(const Graph& g, const Node& n) {
  const auto sl = constant_slice(g, n);
  if (!sl) return false;
  const Shape& in = g.value(n.inputs[0]).info.shape;
  for (size_t i = 0; i < sl->starts.size(); ++i) {
    if (sl->steps[i] != 1) return false;
    const int64_t d = in[static_cast<size_t>(sl->axes[i])];
    int64_t s = sl->starts[i], e = sl->ends[i];
    if (!dim_is_known(d)) {
      if (s != 0 || e < (int64_t{1} << 62)) return false;
      continue;
    }
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (std::clamp<int64_t>(s, 0, d) != 0 || std::clamp<int64_t>(e, 0, d) != d) return false;
  }
  return true;
}

}  // namespace

// Identity, inference Dropout, a Concat of one input, a Pad of zeros and a Slice that keeps
// everything go; a Transpose of a Transpose becomes one
// Transpose by the composed permutation (GPT-2's key: Transpose(0,2,1,3), then a one-input Concat
// for the absent past keys, then Transpose(0,1,3,2) -- one (0,2,3,1) after this pass, the form
// fuse_attention's head split reads), or nothing when they cancel.
Result<PassStats> eliminate_identity(Graph* g) {
  PassStats stats;
  std::vector<ValueId> replace(g->values().size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<ValueId>(v);
  std::vector<Node> kept;
  std::vector<int32_t> transpose_at(g->values().size(), -1);  // value -> the kept Transpose writing it
  for (Node& n : g->nodes()) {
    for (ValueId& in : n.inputs)
      if (in != kNoValue) in = replace[static_cast<size_t>(in)];
    if (n.op_type == "Transpose" && n.domain.empty() && has_perm(n) && !n.inputs.empty() && n.inputs[0] != kNoValue) {
      const int32_t t = transpose_at[static_cast<size_t>(n.inputs[0])];
      if (t >= 0 && has_perm(kept[static_cast<size_t>(t)])) {
        const std::vector<int64_t> inner = kept[static_cast<size_t>(t)].attr_ints("perm"), outer = n.attr_ints("perm");
        if (inner.size() == outer.size()) {
          std::vector<int64_t> perm(outer.size());
          bool ok = true, same = true;
          for (size_t j = 0; j < outer.size() && ok; ++j) {
            ok = outer[j] >= 0 && static_cast<size_t>(outer[j]) < inner.size();
            if (ok) perm[j] = inner[static_cast<size_t>(outer[j])];
            same = same && ok && perm[j] == static_cast<int64_t>(j);
          }
          if (ok) {
            n.inputs[0] = kept[static_cast<size_t>(t)].inputs[0];
            n.attrs["perm"] = ints_attr(perm);
            if (same) {  // the two cancel: an identity (below)
              n.op_type = "Identity";
              n.op = Op::Identity;
              n.attrs.clear();
            }
            ++stats.removed;
          }
        }
      }
    }
    const bool one_input_concat = n.op_type == "Concat" && n.domain.empty() && n.inputs.size() == 1;
    const bool noop_copy = n.domain.empty() && ((n.op_type == "Pad" && pad_is_identity(*g, n)) ||
                                                (n.op_type == "Slice" && slice_is_identity(*g, n)));
    const bool identity = n.op_type == "Identity" || (n.op_type == "Dropout" && dropout_is_identity(*g, n)) ||
                          one_input_concat || noop_copy;
    if (identity && !n.inputs.empty() && n.inputs[0] != kNoValue && !n.outputs.empty() && n.outputs[0] != kNoValue &&
        !g->value(n.outputs[0]).is_graph_output) {
      // Inputs were already rewired (topological order), so chains collapse to the source.
      replace[static_cast<size_t>(n.outputs[0])] = n.inputs[0];
      ++stats.removed;
      continue;
    }
    if (n.op_type == "Transpose" && n.domain.empty() && !n.outputs.empty() && n.outputs[0] != kNoValue)
      transpose_at[static_cast<size_t>(n.outputs[0])] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(n));
  }
  g->nodes() = std::move(kept);
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
