// ShapeSelections (shape_select.h).
#include "passes/shape_select.h"

#include <algorithm>

namespace gpuopt {
namespace {

const Tensor* const_input(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return nullptr;
  const auto& c = g.value(n.inputs[i]).constant;
  return c ? &*c : nullptr;
}

// Slice's rule for a positive step: negative counts from the end, then clamped to [0, size] (a
// start past the end selects nothing).
int64_t clamp_index(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return std::clamp<int64_t>(v, 0, size);
}

}  // namespace

void ShapeSelections::record(const Graph& g, const Node& n) {
  if (n.op_type != "Shape" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] == kNoValue) return;
  const ValueInfo& vi = g.value(n.inputs[0]).info;
  if (!vi.rank_known) return;
  const int64_t r = static_cast<int64_t>(vi.shape.size());
  int64_t start = n.attr_i("start", 0), end = n.attr_i("end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  std::vector<int64_t> d;
  for (int64_t i = start; i < end; ++i) d.push_back(vi.shape[static_cast<size_t>(i)]);
  dims_[n.outputs[0]] = std::move(d);
}

std::optional<Tensor> ShapeSelections::fold(const Graph& g, const Node& n) const {
  if (!n.domain.empty() || n.inputs.empty()) return std::nullopt;
  const auto it = dims_.find(n.inputs[0]);
  if (it == dims_.end()) return std::nullopt;
  const std::vector<int64_t>& dims = it->second;
  const int64_t size = static_cast<int64_t>(dims.size());
  std::vector<int64_t> picked;
  Shape out_shape;
  if (n.op_type == "Gather") {
    const Tensor* idx = const_input(g, n, 1);
    if (!idx || n.attr_i("axis", 0) != 0 || idx->rank() > 1) return std::nullopt;
    for (int64_t i = 0; i < idx->numel(); ++i) {
      int64_t k = static_cast<int64_t>(idx->get_f64(i));
      if (k < -size || k >= size) return std::nullopt;  // the kernel reports it
      picked.push_back(dims[static_cast<size_t>(k < 0 ? k + size : k)]);
    }
    if (idx->rank() == 1) out_shape = {idx->numel()};
  } else if (n.op_type == "Slice" && g.opset >= 10) {
    const Tensor *st = const_input(g, n, 1), *en = const_input(g, n, 2);
    const Tensor* ax = const_input(g, n, 3);
    const Tensor* sp = const_input(g, n, 4);
    const bool absent_ax = n.inputs.size() <= 3 || n.inputs[3] == kNoValue;
    const bool absent_sp = n.inputs.size() <= 4 || n.inputs[4] == kNoValue;
    if (!st || !en || st->numel() != 1 || en->numel() != 1 || (!ax && !absent_ax) || (!sp && !absent_sp)) return std::nullopt;
    if (ax && ax->get_f64(0) != 0 && ax->get_f64(0) != -1) return std::nullopt;
    const int64_t step = sp ? static_cast<int64_t>(sp->get_f64(0)) : 1;
    if (step != 1) return std::nullopt;
    const int64_t b = clamp_index(static_cast<int64_t>(std::max(-9e18, std::min(9e18, st->get_f64(0)))), size);
    const int64_t e = clamp_index(static_cast<int64_t>(std::max(-9e18, std::min(9e18, en->get_f64(0)))), size);
    for (int64_t i = b; i < e; ++i) picked.push_back(dims[static_cast<size_t>(i)]);
    out_shape = {static_cast<int64_t>(picked.size())};
  } else {
    return std::nullopt;
  }
  for (int64_t d : picked)
    if (!dim_is_known(d)) return std::nullopt;
  return Tensor::from_vector<int64_t>(DType::I64, out_shape, picked);
}

}  // namespace gpuopt
