// merge_qkv (merge_qkv.h): an attention's three projections of one input as one GEMM whose
// [.., 3N] output the Attention node reads in place (qkv_packed=1, ops/transformer/attention.cpp).
//
// transpose_sink splits packed projections (GPT-2's c_attn, torchvision's in_proj) into one
// MatMul per part, and BERT's exports write three Linears; after fuse_attention each layer reads
// three [B, S, N] tensors. Merged, a layer runs one GEMM of N' = 3N instead of three (at batch 1
// two launches fewer, and a wider GEMM fills more of the GPU) and no copy: the attention kernels
// and cuDNN's SDPA take Q, K and V through the packed row's strides. Exact: each output element
// is the same dot product plus the same bias.
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

struct Match {
  int32_t attention = -1;
  Projection q, k, v;
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
  if (!pq || !pk || !pv) return std::nullopt;
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
    found.push_back(std::move(*r));
  }
  if (found.empty()) return stats;
  for (Match& r : found) {
    const std::string base = g->nodes()[static_cast<size_t>(r.attention)].name + "/qkv";
    const DType dt = r.q.w.dtype();
    const int64_t rows = r.q.w.shape()[0], n = r.q.w.shape()[1];
    const ValueId w = g->add_constant(base + "/weight", concat_columns({&r.q.w, &r.k.w, &r.v.w}, dt, rows, n));
    const ValueId b = g->add_constant(
        base + "/b", concat_columns({r.q.b ? &*r.q.b : nullptr, r.k.b ? &*r.k.b : nullptr, r.v.b ? &*r.v.b : nullptr},
                                    dt, 0, n));
    // <attention>/qkv/proj: inspect --optimized reports the Gemm of that name as merge_qkv's.
    const ValueId y = g->add_node(*matmul, base + "/proj", {r.q.x, w}, 1)[0];
    const ValueId packed = g->add_node(*add, base, {y, b}, 1)[0];
    Node& att = g->nodes()[static_cast<size_t>(r.attention)];
    att.inputs[0] = packed;
    att.inputs[1] = att.inputs[2] = kNoValue;
    att.attrs["qkv_packed"] = int_attr(1);
    const int replaced = static_cast<int>(r.q.nodes.size() + r.k.nodes.size() + r.v.nodes.size());
    stats.removed += replaced;
    stats.added += 2;
    ++stats.rewritten;
  }
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
