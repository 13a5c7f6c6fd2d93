// TreeEnsemble (ai.onnx.ml opset 5): decision trees over the rows of X, leaf weights aggregated
// per target (sum, average, min, max). CPU reference; post_transform NONE only.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>
#include <limits>
#include <set>

namespace gpuopt {
using namespace tensor_util;

namespace {

enum Mode : int64_t { kLeq = 0, kLt = 1, kGte = 2, kGt = 3, kEq = 4, kNeq = 5, kMember = 6 };
enum Aggregate : int64_t { kAverage = 0, kSum = 1, kMin = 2, kMax = 3 };

std::vector<double> doubles_attr(const Node& n, std::string_view name) {
  const Attribute* a = n.attr(name);
  if (!a) return {};
  if (a->kind == Attribute::Kind::kTensor) return nn::to_doubles(a->t);
  if (a->kind == Attribute::Kind::kFloats) return {a->floats.begin(), a->floats.end()};
  return {};
}

struct Trees {
  std::vector<double> splits, weights;
  std::vector<int64_t> features, modes, true_ids, false_ids, true_leaf, false_leaf, targets, roots, tracks_missing;
  std::vector<std::set<double>> members;  // per node (MEMBER nodes)
  int64_t n_targets = 0, aggregate = kSum;
};

// Everything the op reads, checked so that no index leaves its array.
template <class Ctx>
Result<Trees> load_trees(const Ctx& ctx) {
  const Node& n = ctx.node;
  Trees t;
  t.splits = doubles_attr(n, "nodes_splits");
  t.weights = doubles_attr(n, "leaf_weights");
  const std::vector<double> modes = doubles_attr(n, "nodes_modes");
  for (double m : modes) t.modes.push_back(static_cast<int64_t>(m));
  t.features = n.attr_ints("nodes_featureids");
  t.true_ids = n.attr_ints("nodes_truenodeids");
  t.false_ids = n.attr_ints("nodes_falsenodeids");
  t.true_leaf = n.attr_ints("nodes_trueleafs");
  t.false_leaf = n.attr_ints("nodes_falseleafs");
  t.targets = n.attr_ints("leaf_targetids");
  t.roots = n.attr_ints("tree_roots");
  t.tracks_missing = n.attr_ints("nodes_missing_value_tracks_true");
  t.n_targets = n.attr_i("n_targets", 0);
  t.aggregate = n.attr_i("aggregate_function", kSum);
  if (n.attr_i("post_transform", 0) != 0) return Status::Unimplemented("{}: post_transform other than NONE is not supported", node_label(n));
  const size_t nodes = t.splits.size(), leaves = t.weights.size();
  if (t.modes.size() != nodes || t.features.size() != nodes || t.true_ids.size() != nodes ||
      t.false_ids.size() != nodes || t.true_leaf.size() != nodes || t.false_leaf.size() != nodes ||
      (!t.tracks_missing.empty() && t.tracks_missing.size() != nodes))
    return ctx.error("the nodes_* attributes must all have {} entries", nodes);
  if (t.targets.size() != leaves) return ctx.error("leaf_targetids has {} entries for {} leaf_weights", t.targets.size(), leaves);
  if (t.n_targets < 1) return ctx.error("n_targets must be positive");
  if (t.aggregate < kAverage || t.aggregate > kMax) return ctx.error("aggregate_function {} is not 0-3", t.aggregate);
  for (int64_t tid : t.targets)
    if (tid < 0 || tid >= t.n_targets) return ctx.error("leaf target {} is outside n_targets {}", tid, t.n_targets);
  for (size_t i = 0; i < nodes; ++i) {
    if (t.modes[i] < kLeq || t.modes[i] > kMember) return ctx.error("node {} has mode {}", i, t.modes[i]);
    const int64_t lim_t = t.true_leaf[i] ? static_cast<int64_t>(leaves) : static_cast<int64_t>(nodes);
    const int64_t lim_f = t.false_leaf[i] ? static_cast<int64_t>(leaves) : static_cast<int64_t>(nodes);
    if (t.true_ids[i] < 0 || t.true_ids[i] >= lim_t || t.false_ids[i] < 0 || t.false_ids[i] >= lim_f)
      return ctx.error("node {} points outside the node or leaf arrays", i);
  }
  for (int64_t r : t.roots)
    if (r < 0 || r >= static_cast<int64_t>(std::max(nodes, leaves))) return ctx.error("tree root {} is out of range", r);
  // Set members, NaN-separated, in the order the trees' MEMBER nodes are met depth first.
  t.members.resize(nodes);
  const std::vector<double> mv = doubles_attr(n, "membership_values");
  size_t pos = 0;
  std::vector<int64_t> stack;
  size_t visits = 0;  // a node reached more often than trees * nodes times is on a cycle
  const size_t max_visits = nodes * std::max<size_t>(1, t.roots.size());
  for (int64_t r : t.roots) {
    if (static_cast<size_t>(r) >= nodes) continue;
    stack.push_back(r);
    while (!stack.empty()) {
      const size_t i = static_cast<size_t>(stack.back());
      stack.pop_back();
      if (++visits > max_visits) return ctx.error("the trees have a cycle");
      if (t.modes[i] == kMember) {
        for (; pos < mv.size() && !std::isnan(mv[pos]); ++pos) t.members[i].insert(mv[pos]);
        if (pos >= mv.size() && mv.empty()) return ctx.error("a set-membership node needs membership_values");
        ++pos;
      }
      if (!t.false_leaf[i]) stack.push_back(t.false_ids[i]);  // true branch first
      if (!t.true_leaf[i]) stack.push_back(t.true_ids[i]);
    }
  }
  return t;
}

bool goes_true(const Trees& t, size_t i, double x) {
  if (std::isnan(x) && !t.tracks_missing.empty() && t.tracks_missing[i]) return true;
  const double s = t.splits[i];
  switch (t.modes[i]) {
    case kLeq: return x <= s;
    case kLt: return x < s;
    case kGte: return x >= s;
    case kGt: return x > s;
    case kEq: return x == s;
    case kNeq: return x != s;
    default: return t.members[i].count(x) > 0;
  }
}

}  // namespace

Status infer_TreeEnsemble(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_ASSIGN_OR_RETURN(const Trees t, load_trees(ctx));
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && !dtype_is_float(x.dtype))
    return ctx.error("X has dtype {}; expected a float type", dtype_name(x.dtype));
  if (x.rank_known && x.shape.size() != 2) return ctx.error("X must be 2-D [rows, features]; got rank {}", x.shape.size());
  set_output(ctx, 0, x.dtype, {x.rank_known ? x.shape[0] : kUnknownDim, t.n_targets});
  return Status::Ok();
}

Status cpu_TreeEnsemble(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const Trees t, load_trees(ctx));
  const Tensor& X = ctx.in(0);
  const int64_t rows = X.dim(0), F = X.dim(1), T = t.n_targets;
  const std::vector<double> x = nn::to_doubles(X);
  const double big = X.dtype() == DType::F64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
  const double init = t.aggregate == kMin ? big : t.aggregate == kMax ? -big : 0.0;
  std::vector<double> y(static_cast<size_t>(rows * T), init);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * F;
    for (int64_t root : t.roots) {
      size_t i = static_cast<size_t>(root);
      // A root whose branches both go to the same leaf is that leaf.
      bool leaf = static_cast<size_t>(root) < t.splits.size() && t.true_leaf[i] && t.false_leaf[i] && t.true_ids[i] == t.false_ids[i];
      for (size_t steps = 0; !leaf; ++steps) {
        if (steps > t.splits.size()) return ctx.error("the trees have a cycle");
        if (t.features[i] < 0 || t.features[i] >= F) return ctx.error("node {} reads feature {} of {}", i, t.features[i], F);
        const bool go = goes_true(t, i, row[t.features[i]]);
        leaf = go ? t.true_leaf[i] : t.false_leaf[i];
        i = static_cast<size_t>(go ? t.true_ids[i] : t.false_ids[i]);
      }
      double& out = y[static_cast<size_t>(r * T + t.targets[i])];
      const double w = t.weights[i];
      if (t.aggregate == kSum) out += w;
      else if (t.aggregate == kAverage) out += w / static_cast<double>(t.roots.size());
      else if (t.aggregate == kMin) out = std::min(out, w);
      else out = std::max(out, w);
    }
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_TreeEnsemble(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
