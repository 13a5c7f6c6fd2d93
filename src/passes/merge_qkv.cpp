// merge_qkv (merge_qkv.h): an attention's three projections of one input as one GEMM whose
// [.., 3N] output the Attention node reads in place (qkv_packed=1, ops/transformer/attention.cpp).
//
// transpose_sink splits packed projections (GPT-2's c_attn, torchvision's in_proj) into one
// MatMul per part, and BERT's exports write three Linears; after fuse_attention each layer reads
// three [B, S, N] tensors. Merged, a layer runs one GEMM of N' = 3N instead of three (at batch 1
// two launches fewer, and a wider GEMM fills more of the GPU) and no copy: the attention kernels
// and cuDNN's SDPA take Q, K and V through the packed row's strides. Exact: each output element
// is the same dot product plus the same bias.
//
// At --precision int8 on the GPU (fold_qdq has run), the three projections are Int8Gemms of one
// int8 input with one activation scale: they become one Int8Gemm over the weights' rows
// stacked ([3N, K]), the per-column weight scales and the biases concatenated (a per-tensor
// scale repeated over its N columns, a missing bias as zeros): also exact, each column keeps its
// own scale, sum and bias.
#include "passes/merge_qkv.h"

#include "passes/match.h"

#include <cstring>
#include <optional>

namespace gpuopt {
namespace {

// y = MatMul(x, W) [+ b], W a constant [K, N] and b a constant [N] of W's float dtype; y read
// only by the attention and the MatMul's output only by the Add.
struct Projection {
  ValueId x = kNoValue;
  Tensor w;
  std::optional<Tensor> b;
  std::vector<const Node*> nodes;
};

std::optional<Projection> projection(const Matcher& m, ValueId y) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  Projection p;
  if (m.readers(y).size() != 1) return std::nullopt;  // also: not a graph output
  ValueId mm_out = y;
  if (const Node* add = m.producer(y, "Add"); add && add->inputs.size() == 2) {
    for (size_t side = 0; side < 2 && !p.b; ++side) {
      const auto& c = g.value(add->inputs[side]).constant;
      if (c && c->rank() == 1 && add->inputs[1 - side] != add->inputs[side]) {
        p.b = *c;
        mm_out = add->inputs[1 - side];
      }
    }
    if (!p.b || m.readers(mm_out).size() != 1) return std::nullopt;
    p.nodes.push_back(add);
  }
  const Node* mm = m.producer(mm_out, "MatMul");
  if (!mm || mm->inputs.size() != 2 || mm->inputs[0] == kNoValue) return std::nullopt;
  const auto& w = g.value(mm->inputs[1]).constant;
  if (!w || w->rank() != 2 || !dtype_is_float(w->dtype())) return std::nullopt;
  if (p.b && (p.b->dtype() != w->dtype() || p.b->shape()[0] != w->shape()[1])) return std::nullopt;
  p.x = mm->inputs[0];
  p.w = *w;
  p.nodes.push_back(mm);
  return p;
}

// y = Int8Gemm(xq, Wt const i8 [N, K], a_scale const, b_scale const [1 or N], [bias const [N]])
// with no activation, residual or int8 output, y read only by the attention (fold_qdq.cpp).
struct Int8Projection {
  ValueId x = kNoValue, a_scale = kNoValue;
  float a = 0.f;
  Tensor w, b_scale;
  std::optional<Tensor> b;
  const Node* node = nullptr;
};

std::optional<Int8Projection> int8_projection(const Matcher& m, ValueId y) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  if (y == kNoValue || m.readers(y).size() != 1) return std::nullopt;
  const int32_t pi = g.value(y).producer;
  if (pi < 0 || const_cast<Matcher&>(m).drop()[static_cast<size_t>(pi)]) return std::nullopt;
  const Node& n = g.nodes()[static_cast<size_t>(pi)];
  if (n.op != Op::Int8Gemm || n.outputs.size() != 1 || n.inputs.size() < 4 || n.inputs.size() > 5 ||
      !n.attr_s("activation", "").empty())
    return std::nullopt;
  const auto& w = g.value(n.inputs[1]).constant;
  const auto& as = g.value(n.inputs[2]).constant;
  const auto& bs = g.value(n.inputs[3]).constant;
  if (!w || w->dtype() != DType::I8 || w->rank() != 2 || !as || as->numel() != 1 || !bs ||
      bs->dtype() != DType::F32 || (bs->numel() != 1 && bs->numel() != w->dim(0)))
    return std::nullopt;
  Int8Projection p;
  if (n.inputs.size() == 5 && n.inputs[4] != kNoValue) {
    const auto& b = g.value(n.inputs[4]).constant;
    if (!b || b->dtype() != DType::F32 || b->rank() != 1 || b->numel() != w->dim(0)) return std::nullopt;
    p.b = *b;
  }
  p.x = n.inputs[0];
  p.a_scale = n.inputs[2];
  p.a = static_cast<float>(as->get_f64(0));
  p.w = *w;
  p.b_scale = *bs;
  p.node = &n;
  return p;
}

struct Match {
  int32_t attention = -1;
  Projection q, k, v;
  std::optional<Int8Projection> iq, ik, iv;  // the Int8Gemm form instead
};

std::optional<Match> match(const Matcher& m, const Node& n) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  if (!is_default(n, "Attention") || n.attr_i("qkv_packed", 0) != 0 || n.inputs.size() < 3) return std::nullopt;
  const int64_t hq = n.attr_i("q_num_heads", 0), hkv = n.attr_i("kv_num_heads", 0);
  if (hq <= 0 || hq != hkv || n.attr_f("softcap", 0.f) != 0.f) return std::nullopt;
  for (size_t i = 4; i < n.inputs.size(); ++i)
    if (n.inputs[i] != kNoValue) return std::nullopt;  // past key/value, nonpad_kv_seqlen
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] != kNoValue) return std::nullopt;  // present key/value, qk_matmul_output
  const ValueId q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  if (q == kNoValue || k == kNoValue || v == kNoValue || q == k || q == v || k == v) return std::nullopt;
  const ValueInfo& qi = g.value(q).info;
  if (!qi.rank_known || qi.shape.size() != 3) return std::nullopt;
  Match r;
  r.attention = m.index_of(&n);
  auto pq = projection(m, q), pk = projection(m, k), pv = projection(m, v);
  if (!pq || !pk || !pv) {
    r.iq = int8_projection(m, q);
    r.ik = int8_projection(m, k);
    r.iv = int8_projection(m, v);
    if (!r.iq || !r.ik || !r.iv) return std::nullopt;
    for (const Int8Projection* p : {&*r.ik, &*r.iv})
      if (p->x != r.iq->x || p->a != r.iq->a || p->w.shape() != r.iq->w.shape()) return std::nullopt;
    if (r.iq->w.dim(0) % hq != 0) return std::nullopt;
    return r;
  }
  for (const Projection* p : {&*pk, &*pv})
    if (p->x != pq->x || p->w.dtype() != pq->w.dtype() || p->w.shape() != pq->w.shape()) return std::nullopt;
  if (pq->w.shape()[1] % hq != 0) return std::nullopt;
  r.q = std::move(*pq);
  r.k = std::move(*pk);
  r.v = std::move(*pv);
  return r;
}

// [K, 3N] from three [K, N] (or [3N] from three [N], a missing one as zeros).
Tensor concat_columns(const std::vector<const Tensor*>& parts, DType dt, int64_t rows, int64_t n) {
  Tensor out = Tensor::zeros(dt, rows == 0 ? Shape{3 * n} : Shape{rows, 3 * n});
  const size_t es = dtype_size(dt), chunk = static_cast<size_t>(n) * es;
  char* dst = static_cast<char*>(out.raw());
  const int64_t r_end = rows == 0 ? 1 : rows;
  for (size_t j = 0; j < parts.size(); ++j) {
    if (!parts[j]) continue;
    const char* src = static_cast<const char*>(parts[j]->raw());
    for (int64_t r = 0; r < r_end; ++r) std::memcpy(dst + (static_cast<size_t>(r) * 3 + j) * chunk, src + r * chunk, chunk);
  }
  return out;
}

// The one Int8Gemm of the three (weights' rows stacked, scales and biases concatenated); returns
// its [.., 3N] output.
ValueId add_int8_qkv(Graph* g, const Match& r, const std::string& base) {
  const Int8Projection* parts[3] = {&*r.iq, &*r.ik, &*r.iv};
  const int64_t n = r.iq->w.dim(0), k = r.iq->w.dim(1);
  Tensor w = Tensor::empty(DType::I8, {3 * n, k});
  Tensor bs = Tensor::empty(DType::F32, {3 * n});
  Tensor b = Tensor::zeros(DType::F32, {3 * n});
  for (int j = 0; j < 3; ++j) {
    std::memcpy(w.data<int8_t>() + j * n * k, parts[j]->w.data<int8_t>(), static_cast<size_t>(n * k));
    for (int64_t c = 0; c < n; ++c) {
      bs.data<float>()[j * n + c] = parts[j]->b_scale.data<float>()[parts[j]->b_scale.numel() == 1 ? 0 : c];
      if (parts[j]->b) b.data<float>()[j * n + c] = parts[j]->b->data<float>()[c];
    }
  }
  const ValueId wv = g->add_constant(base + "/int8_weight", std::move(w));
  const ValueId bsv = g->add_constant(base + "/b_scale", std::move(bs));
  const ValueId bv = g->add_constant(base + "/b", std::move(b));
  // <attention>/qkv/proj: inspect --optimized reports it as merge_qkv's.
  const ValueId y = g->add_node(Op::Int8Gemm, base + "/proj", {r.iq->x, wv, r.iq->a_scale, bsv, bv}, 1, {}, {base})[0];
  Node& q = g->nodes().back();
  q.op_type = "Int8Gemm";
  q.domain = "ai.gpuopt";
  return y;
}

}  // namespace

Result<PassStats> merge_qkv(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  const auto matmul = op_from_name("MatMul"), add = op_from_name("Add");
  if (!matmul || !add) return stats;
  Matcher m(g);
  std::vector<Match> found;
  for (const Node& n : g->nodes()) {
    auto r = match(m, n);
    if (!r) continue;
    for (const Projection* p : {&r->q, &r->k, &r->v})
      for (const Node* d : p->nodes) m.mark(d);
    if (r->iq)
      for (const auto* p : {&*r->iq, &*r->ik, &*r->iv}) m.mark(p->node);
    found.push_back(std::move(*r));
  }
  if (found.empty()) return stats;
  for (Match& r : found) {
    const std::string base = g->nodes()[static_cast<size_t>(r.attention)].name + "/qkv";
    ValueId packed;
    if (r.iq) {
      packed = add_int8_qkv(g, r, base);
      stats.removed += 3;
      stats.added += 1;
    } else {
      const DType dt = r.q.w.dtype();
      const int64_t rows = r.q.w.shape()[0], n = r.q.w.shape()[1];
      const ValueId w = g->add_constant(base + "/weight", concat_columns({&r.q.w, &r.k.w, &r.v.w}, dt, rows, n));
      const ValueId b = g->add_constant(
          base + "/b", concat_columns({r.q.b ? &*r.q.b : nullptr, r.k.b ? &*r.k.b : nullptr, r.v.b ? &*r.v.b : nullptr},
                                      dt, 0, n));
      // <attention>/qkv/proj: inspect --optimized reports the Gemm of that name as merge_qkv's.
      const ValueId y = g->add_node(*matmul, base + "/proj", {r.q.x, w}, 1)[0];
      packed = g->add_node(*add, base, {y, b}, 1)[0];
      stats.removed += static_cast<int>(r.q.nodes.size() + r.k.nodes.size() + r.v.nodes.size());
      stats.added += 2;
    }
    Node& att = g->nodes()[static_cast<size_t>(r.attention)];
    att.inputs[0] = packed;
    att.inputs[1] = att.inputs[2] = kNoValue;
    att.attrs["qkv_packed"] = int_attr(1);
    ++stats.rewritten;
  }
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
