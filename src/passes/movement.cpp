#include "passes/movement.h"

#include <algorithm>
#include <numeric>

namespace gpuopt {

Mono mono_mul(const Mono& a, const Mono& b) {
  Mono m{a.c * b.c, a.syms};
  m.syms.insert(m.syms.end(), b.syms.begin(), b.syms.end());
  std::sort(m.syms.begin(), m.syms.end());
  return m;
}

std::optional<Mono> mono_div(const Mono& a, const Mono& b) {
  if (b.c <= 0 || a.c < 0 || a.c % b.c != 0) return std::nullopt;
  Mono m{a.c / b.c, {}};
  std::vector<int64_t> rest = a.syms;
  for (int64_t s : b.syms) {
    auto it = std::find(rest.begin(), rest.end(), s);
    if (it == rest.end()) return std::nullopt;
    rest.erase(it);
  }
  m.syms = std::move(rest);
  return m;
}

namespace {

Mono mono_of_dim(int64_t d) { return d >= 0 ? Mono{d, {}} : Mono{1, {d}}; }

Mono product(const MShape& s) {
  Mono p;
  for (const Mono& m : s) p = mono_mul(p, m);
  return p;
}

std::optional<std::vector<int64_t>> const_ints(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  if (t.dtype() != DType::I64 && t.dtype() != DType::I32) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.get_i64(i);
  return out;
}

// Squeeze/Unsqueeze axes: the input (opset 13+) or the attribute.
std::optional<std::vector<int64_t>> axes_of(const Graph& g, const Node& n) {
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) return const_ints(g, n.inputs[1]);
  if (n.has_attr("axes")) return n.attr_ints("axes");
  return std::vector<int64_t>{};
}

bool normalize(std::vector<int64_t>* axes, size_t rank) {
  for (int64_t& a : *axes) {
    if (a < 0) a += static_cast<int64_t>(rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
  }
  std::sort(axes->begin(), axes->end());
  return std::adjacent_find(axes->begin(), axes->end()) == axes->end();
}

}  // namespace

std::optional<MShape> MonoShapes::shape(ValueId v) {
  if (v == kNoValue) return std::nullopt;
  if (auto it = shapes_.find(v); it != shapes_.end()) return it->second;
  std::optional<MShape> s;
  const int32_t p = g_.value(v).producer;
  if (p >= 0 && depth_ < 64) {
    ++depth_;
    s = derive_shape(g_.nodes()[static_cast<size_t>(p)], v);
    --depth_;
  }
  const ValueInfo& info = g_.value(v).info;
  if (!s && info.rank_known &&
      std::none_of(info.shape.begin(), info.shape.end(), [](int64_t d) { return d == kUnknownDim; })) {
    s = MShape{};
    for (int64_t d : info.shape) s->push_back(mono_of_dim(d));
  }
  shapes_[v] = s;
  return s;
}

std::optional<MShape> MonoShapes::derive_shape(const Node& n, ValueId v) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1 || n.outputs[0] != v) return std::nullopt;
  if (n.op_type == "Transpose") {
    auto in = shape(n.inputs[0]);
    if (!in) return std::nullopt;
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (size_t i = in->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != in->size()) return std::nullopt;
    MShape out;
    for (int64_t a : perm) {
      if (a < 0 || a >= static_cast<int64_t>(in->size())) return std::nullopt;
      out.push_back((*in)[static_cast<size_t>(a)]);
    }
    return out;
  }
  if (n.op_type == "Reshape" && n.inputs.size() == 2) {
    auto in = shape(n.inputs[0]);
    auto t = value(n.inputs[1]);
    if (!in || !t) return std::nullopt;
    const bool allowzero = n.attr_i("allowzero", 0) != 0;
    MShape out;
    int infer_at = -1;
    Mono known;
    for (size_t i = 0; i < t->size(); ++i) {
      Mono m = (*t)[i];
      if (m.is_const() && m.c == 0 && !allowzero) {
        if (i >= in->size()) return std::nullopt;
        m = (*in)[i];
      } else if (m.is_const() && m.c == -1) {
        if (infer_at >= 0) return std::nullopt;
        infer_at = static_cast<int>(i);
      } else if (m.c < 0) {
        return std::nullopt;
      }
      if (static_cast<int>(i) != infer_at) known = mono_mul(known, m);
      out.push_back(m);
    }
    if (infer_at >= 0) {
      auto rest = mono_div(product(*in), known);
      if (!rest) return std::nullopt;
      out[static_cast<size_t>(infer_at)] = *rest;
    } else if (!(product(out) == product(*in))) {
      return std::nullopt;
    }
    return out;
  }
  if (n.op_type == "Gemm" && n.inputs.size() >= 2) {  // [M, N]: M from A, N from B
    auto a = shape(n.inputs[0]), b = shape(n.inputs[1]);
    if (!a || !b || a->size() != 2 || b->size() != 2) return std::nullopt;
    return MShape{(*a)[n.attr_i("transA", 0) ? 1 : 0], (*b)[n.attr_i("transB", 0) ? 0 : 1]};
  }
  if (n.op_type == "Squeeze" || n.op_type == "Unsqueeze") {
    auto in = shape(n.inputs[0]);
    auto axes = axes_of(g_, n);
    if (!in || !axes) return std::nullopt;
    AtomChain c(*in);
    if (!(n.op_type == "Squeeze" ? c.squeeze(*axes) : c.unsqueeze(*axes))) return std::nullopt;
    return c.final_shape();
  }
  return std::nullopt;
}

std::optional<MShape> MonoShapes::value(ValueId v) {
  if (v == kNoValue) return std::nullopt;
  if (auto it = values_.find(v); it != values_.end()) return it->second;
  std::optional<MShape> s;
  const Value& x = g_.value(v);
  if (auto c = const_ints(g_, v)) {
    s = MShape{};
    for (int64_t d : *c) s->push_back(Mono{d, {}});
  } else if (x.info.dims_value) {
    s = MShape{};
    for (int64_t d : *x.info.dims_value) s->push_back(d >= -1 ? Mono{d, {}} : Mono{1, {d}});
  } else if (x.producer >= 0 && depth_ < 64) {
    ++depth_;
    s = derive_value(g_.nodes()[static_cast<size_t>(x.producer)]);
    --depth_;
  }
  values_[v] = s;
  return s;
}

std::optional<MShape> MonoShapes::derive_value(const Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Shape") {
    auto s = shape(n.inputs[0]);
    if (!s || n.has_attr("start") || n.has_attr("end")) return std::nullopt;
    return s;
  }
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Cast" || op == "Identity" || op == "Reshape") return value(n.inputs[0]);
  if (op == "Concat") {
    MShape out;
    for (ValueId in : n.inputs) {
      auto p = value(in);
      if (!p) return std::nullopt;
      out.insert(out.end(), p->begin(), p->end());
    }
    return out;
  }
  if (op == "Gather" && n.inputs.size() == 2 && n.attr_i("axis", 0) == 0) {
    auto data = value(n.inputs[0]);
    auto idx = const_ints(g_, n.inputs[1]);
    if (!data || !idx) return std::nullopt;
    MShape out;
    for (int64_t i : *idx) {
      if (i < 0) i += static_cast<int64_t>(data->size());
      if (i < 0 || i >= static_cast<int64_t>(data->size())) return std::nullopt;
      out.push_back((*data)[static_cast<size_t>(i)]);
    }
    return out;
  }
  if (op == "Slice" && n.inputs.size() >= 3) {
    auto data = value(n.inputs[0]);
    auto st = const_ints(g_, n.inputs[1]), en = const_ints(g_, n.inputs[2]);
    if (!data || !st || !en || st->size() != 1 || en->size() != 1) return std::nullopt;
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue && const_ints(g_, n.inputs[3]) != std::vector<int64_t>{0})
      return std::nullopt;
    if (n.inputs.size() > 4 && n.inputs[4] != kNoValue && const_ints(g_, n.inputs[4]) != std::vector<int64_t>{1})
      return std::nullopt;
    const int64_t size = static_cast<int64_t>(data->size());
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t{0}, size); };
    const int64_t b = clamp((*st)[0]), e = clamp((*en)[0]);
    return MShape(data->begin() + b, data->begin() + std::max(b, e));
  }
  if ((op == "Mul" || op == "Div") && n.inputs.size() == 2) {
    auto a = value(n.inputs[0]), b = value(n.inputs[1]);
    if (!a || !b || (a->size() != b->size() && a->size() != 1 && b->size() != 1)) return std::nullopt;
    MShape out;
    for (size_t i = 0; i < std::max(a->size(), b->size()); ++i) {
      const Mono& x = (*a)[a->size() == 1 ? 0 : i];
      const Mono& y = (*b)[b->size() == 1 ? 0 : i];
      if (x.c < 0 || y.c < 0) return std::nullopt;
      if (op == "Mul") {
        out.push_back(mono_mul(x, y));
      } else {
        auto q = mono_div(x, y);
        if (!q) return std::nullopt;
        out.push_back(*q);
      }
    }
    return out;
  }
  return std::nullopt;
}

AtomChain::AtomChain(const MShape& src) {
  for (const Mono& m : src) {
    src_.emplace_back();
    if (m.is_one()) continue;
    src_.back().push_back(static_cast<int>(atom_.size()));
    atom_.push_back(m);
  }
  cur_ = src_;
}

Mono AtomChain::size_of(const std::vector<int>& atoms) const {
  Mono p;
  for (int a : atoms) p = mono_mul(p, atom_[static_cast<size_t>(a)]);
  return p;
}

MShape AtomChain::final_shape() const {
  MShape s;
  for (const auto& d : cur_) s.push_back(size_of(d));
  return s;
}

void AtomChain::split(int atom, const Mono& first) {
  const int a1 = static_cast<int>(atom_.size()), a2 = a1 + 1;
  const Mono rest = *mono_div(atom_[static_cast<size_t>(atom)], first);
  atom_.push_back(first);
  atom_.push_back(rest);
  for (auto* dims : {&src_, &cur_})
    for (auto& d : *dims)
      for (size_t i = 0; i < d.size(); ++i)
        if (d[i] == atom) {
          d[i] = a2;
          d.insert(d.begin() + static_cast<std::ptrdiff_t>(i), a1);
          break;
        }
}

bool AtomChain::transpose(const std::vector<int64_t>& perm) {
  if (perm.size() != cur_.size()) return false;
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    if (a < 0 || a >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(a)]) return false;
    seen[static_cast<size_t>(a)] = true;
    out.push_back(cur_[static_cast<size_t>(a)]);
  }
  cur_ = std::move(out);
  return true;
}

bool AtomChain::reshape(const MShape& out) {
  std::vector<int> flat;
  for (const auto& d : cur_) flat.insert(flat.end(), d.begin(), d.end());
  std::vector<std::vector<int>> next;
  size_t k = 0;
  for (const Mono& want : out) {
    if (want.c <= 0) return false;
    next.emplace_back();
    Mono acc;
    while (!(acc == want)) {
      if (k == flat.size()) return false;
      const auto need = mono_div(want, acc);
      if (!need) return false;
      const int a = flat[k];
      if (mono_div(*need, atom_[static_cast<size_t>(a)])) {
        acc = mono_mul(acc, atom_[static_cast<size_t>(a)]);
        next.back().push_back(a);
        ++k;
      } else if (mono_div(atom_[static_cast<size_t>(a)], *need)) {
        split(a, *need);  // ids a1 = size-2, a2 = size-1; a2 stays next in `flat`
        const int a1 = static_cast<int>(atom_.size()) - 2;
        flat[k] = a1 + 1;
        next.back().push_back(a1);
        acc = want;
      } else {
        return false;
      }
    }
  }
  if (k != flat.size()) return false;
  cur_ = std::move(next);
  return true;
}

bool AtomChain::squeeze(std::vector<int64_t> axes) {
  if (axes.empty()) {  // every dim of size 1: a symbolic dim might be one at run time
    for (size_t i = 0; i < cur_.size(); ++i) {
      if (cur_[i].empty()) axes.push_back(static_cast<int64_t>(i));
      else if (!size_of(cur_[i]).is_const()) return false;
    }
  }
  if (!normalize(&axes, cur_.size())) return false;
  for (size_t i = axes.size(); i-- > 0;) {
    if (!cur_[static_cast<size_t>(axes[i])].empty()) return false;  // only dims known to be 1
    cur_.erase(cur_.begin() + axes[i]);
  }
  return true;
}

bool AtomChain::unsqueeze(std::vector<int64_t> axes) {
  if (!normalize(&axes, cur_.size() + axes.size())) return false;
  for (int64_t a : axes) cur_.insert(cur_.begin() + a, std::vector<int>{});
  return true;
}

AtomChain::Plan AtomChain::plan() const {
  // Blocks: runs of atoms next to each other in the source, in the result and in one dim of each.
  std::vector<int> src_dim(atom_.size(), -1), cur_dim(atom_.size(), -1);
  std::vector<int> src_order, cur_order;
  for (size_t d = 0; d < src_.size(); ++d)
    for (int a : src_[d]) src_dim[static_cast<size_t>(a)] = static_cast<int>(d), src_order.push_back(a);
  for (size_t d = 0; d < cur_.size(); ++d)
    for (int a : cur_[d]) cur_dim[static_cast<size_t>(a)] = static_cast<int>(d), cur_order.push_back(a);
  std::vector<int> cur_pos(atom_.size(), -1);
  for (size_t i = 0; i < cur_order.size(); ++i) cur_pos[static_cast<size_t>(cur_order[i])] = static_cast<int>(i);
  std::vector<std::vector<int>> blocks;  // in source order
  for (size_t i = 0; i < src_order.size(); ++i) {
    const int a = src_order[i];
    if (i > 0) {
      const int b = src_order[i - 1];
      const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
      if (src_dim[ua] == src_dim[ub] && cur_dim[ua] == cur_dim[ub] && cur_pos[ua] == cur_pos[ub] + 1) {
        blocks.back().push_back(a);
        continue;
      }
    }
    blocks.push_back({a});
  }
  // Block order in the result.
  std::vector<int64_t> perm(blocks.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) {
    return cur_pos[static_cast<size_t>(blocks[static_cast<size_t>(x)][0])] < cur_pos[static_cast<size_t>(blocks[static_cast<size_t>(y)][0])];
  });
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  Plan p;
  MShape block_shape;
  for (const auto& b : blocks) block_shape.push_back(size_of(b));
  MShape src_shape;
  for (const auto& d : src_) src_shape.push_back(size_of(d));
  const MShape out = final_shape();
  if (identity) {
    if (!(out == src_shape)) p.post = out;
    return p;
  }
  p.perm = perm;
  if (!(block_shape == src_shape)) p.pre = block_shape;
  MShape permuted;
  for (int64_t b : perm) permuted.push_back(block_shape[static_cast<size_t>(b)]);
  if (!(permuted == out)) p.post = out;
  return p;
}

std::optional<std::vector<int64_t>> reshape_target(const MShape& in, const MShape& out) {
  std::vector<int64_t> t;
  bool inferred = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < in.size() && out[i] == in[i] && !out[i].is_const()) {
      t.push_back(0);
    } else if (out[i].is_const() && out[i].c > 0) {
      t.push_back(out[i].c);
    } else if (!inferred) {
      inferred = true;
      t.push_back(-1);
    } else {
      return std::nullopt;
    }
  }
  return t;
}

}  // namespace gpuopt
