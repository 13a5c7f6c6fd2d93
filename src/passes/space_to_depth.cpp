// The 2x2 space-to-depth written as four strided Slices and a Concat (window_attention.h):
// torchvision's Swin patch merging, x [B, H, W, C] ->
//   Concat(x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2], axis -1),
// and YOLOv5's Focus layer on NCHW alike, runs six Slices (two per input, the first ones shared)
// and a Concat: three copies of the map. It is one Transpose between two views:
//   Reshape(x, [B, H/2, 2, W/2, 2, C]) -> Transpose (the two parity axes, most significant first,
//   before C) -> Reshape [B, H/2, W/2, 4C]
// with the parity axes ordered as the Concat orders its inputs.
#include "passes/match.h"
#include "passes/window_attention.h"

#include <map>

namespace gpuopt {
namespace {

// The (axis -> start) a chain of Slices (each step 2 on an axis of even known extent, taking
// every other element from start 0 or 1, no axis twice) selects from its source, or nullopt.
std::optional<std::map<int64_t, int64_t>> parity_chain(const Graph& g, const Matcher& m, ValueId v, ValueId* src) {
  std::map<int64_t, int64_t> starts;
  for (int depth = 0; depth < 4; ++depth) {
    const Node* s = m.producer(v, "Slice");
    if (!s) break;
    const auto sl = constant_slice(g, *s);
    if (!sl) return std::nullopt;
    const Shape& in = g.value(s->inputs[0]).info.shape;
    for (size_t i = 0; i < sl->starts.size(); ++i) {
      const int64_t a = sl->axes[i], d = in[static_cast<size_t>(a)];
      if (sl->steps[i] != 2 || !dim_is_known(d) || d % 2 != 0 || d < 2 || starts.count(a)) return std::nullopt;
      int64_t st = sl->starts[i], en = sl->ends[i];
      st = std::clamp<int64_t>(st < 0 ? st + d : st, 0, d);
      en = std::clamp<int64_t>(en < 0 ? en + d : en, 0, d);
      if ((st != 0 && st != 1) || (en - st + 1) / 2 != d / 2) return std::nullopt;
      starts[a] = st;
    }
    v = s->inputs[0];
  }
  if (starts.empty()) return std::nullopt;
  *src = v;
  return starts;
}

ValueId i64s(Graph* g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

struct S2D {
  ValueId x, y;
  std::vector<int64_t> split, perm, merged;
  std::string name;
};

std::optional<S2D> match(const Graph& g, const Matcher& m, const Node& cat) {
  if (cat.inputs.size() != 4 || cat.outputs.size() != 1) return std::nullopt;
  ValueId x = kNoValue;
  std::vector<std::map<int64_t, int64_t>> parts;
  for (ValueId in : cat.inputs) {
    ValueId src = kNoValue;
    auto p = parity_chain(g, m, in, &src);
    if (!p || p->size() != 2 || (x != kNoValue && src != x)) return std::nullopt;
    x = src;
    parts.push_back(*p);
  }
  const ValueInfo& xi = g.value(x).info;
  if (!xi.rank_known) return std::nullopt;
  const int64_t r = static_cast<int64_t>(xi.shape.size());
  const int64_t a0 = parts[0].begin()->first, a1 = std::next(parts[0].begin())->first;
  int64_t c = cat.attr_i("axis", 0);
  c = c < 0 ? c + r : c;
  if (c < 0 || c >= r || c == a0 || c == a1) return std::nullopt;
  // Input k selects parities (p0, p1) on (a0, a1) with k = p0 * w0 + p1 * w1, {w0, w1} = {1, 2}.
  int64_t w0 = 0;
  for (int64_t cand : {1, 2}) {
    bool ok = true;
    for (size_t k = 0; k < 4 && ok; ++k) {
      const auto& p = parts[k];
      ok = p.count(a0) && p.count(a1) && p.at(a0) * cand + p.at(a1) * (3 - cand) == static_cast<int64_t>(k);
    }
    if (ok) w0 = cand;
  }
  if (w0 == 0) return std::nullopt;
  const int64_t lead = std::min({a0, a1, c});
  for (int64_t d = lead; d < r; ++d)
    if (!dim_is_known(xi.shape[static_cast<size_t>(d)]) || xi.shape[static_cast<size_t>(d)] <= 0) return std::nullopt;
  S2D s;
  s.x = x;
  s.y = cat.outputs[0];
  s.name = cat.name.empty() ? "space_to_depth" : cat.name + "/space_to_depth";
  // The split view: a -> (a / 2, 2); pos[i] is where original axis i's (first) dim lands.
  std::vector<int64_t> pos(static_cast<size_t>(r));
  for (int64_t i = 0, p = 0; i < r; ++i) {
    pos[static_cast<size_t>(i)] = p;
    const int64_t d = xi.shape[static_cast<size_t>(i)];
    const bool split = i == a0 || i == a1;
    if (i < lead) {
      s.split.push_back(0);
    } else if (split) {
      s.split.push_back(d / 2);
      s.split.push_back(2);
    } else {
      s.split.push_back(d);
    }
    p += split ? 2 : 1;
  }
  const int64_t major = w0 == 2 ? a0 : a1, minor = w0 == 2 ? a1 : a0;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t d = xi.shape[static_cast<size_t>(i)];
    if (i == c) {
      s.perm.push_back(pos[static_cast<size_t>(major)] + 1);
      s.perm.push_back(pos[static_cast<size_t>(minor)] + 1);
    }
    s.perm.push_back(pos[static_cast<size_t>(i)]);
    s.merged.push_back(i < lead ? 0 : i == c ? 4 * d : (i == a0 || i == a1) ? d / 2 : d);
  }
  return s;
}

}  // namespace

Result<PassStats> space_to_depth_as_transpose(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<S2D> todo;
  for (const Node& n : g->nodes()) {
    if (!is_default(n, "Concat")) continue;
    auto s = match(*g, m, n);
    if (!s) continue;
    m.mark(&n);  // the Slices die with it when nothing else reads them
    todo.push_back(std::move(*s));
  }
  for (const S2D& s : todo) {
    const ValueId v = g->add_node(Op::Reshape, s.name + "/split", {s.x, i64s(g, s.name + "/split_shape", s.split)}, 1)[0];
    const ValueId t = g->add_node(Op::Transpose, s.name, {v}, 1, {{"perm", ints_attr(s.perm)}})[0];
    const ValueId y = g->add_node(Op::Reshape, s.name + "/merge", {t, i64s(g, s.name + "/merged_shape", s.merged)}, 1)[0];
    g->nodes().back().outputs[0] = s.y;
    g->value(y).producer = -1;
    ++stats.rewritten;
  }
  if (todo.empty()) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
  stats.removed = dead.removed + static_cast<int>(todo.size());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
