// pack_nhwc_entries (passes.h): after layout_nhwc, a channels-last region's entry from a 4-D
// float value, Transpose(perm 0,2,3,1), and the Cast in front of it (the model's f32 input made
// f16 by convert_precision, read by the Transpose alone), become one ToNhwc (ai.gpuopt): one pass
// over the input instead of two.
//
// Where every reader of the entry is a group-1 NhwcFusedConv with a constant W and the input has
// fewer than 4 channels (an RGB image), ToNhwc also writes a fourth, zero channel and the convs'
// W gets zero weights for it: the sums are the same (each added product is 0 x 0), and cuDNN's
// stem kernel takes 4 channels as they are where it pads 3 itself, in a separate pass over the
// tensor, before each call (H200, ResNet-50's 7x7 stem at batch 256: nhwcAddPadding 120 us + a
// 25 us memset, then the same 403 us conv; docs/perf-notes.md). GPUOPT_DISABLE_FUSION=nhwc_entry
// keeps the Cast and the Transpose.
//
// At int8, a QDQ model quantizes its input: Cast -> QuantizeLinear -> DequantizeLinear (one
// constant scale and zero point, the DQ's output of the Cast's type) -> entry. ToNhwc then takes
// the round trip in too (its y_scale and y_zero_point inputs, the kernels' arithmetic), so the
// input is read once instead of four times (Cast, Q, DQ, Transpose).
#include "ir/op_table.h"
#include "passes/match.h"
#include "passes/passes.h"

#include <cstring>

namespace gpuopt {
namespace {

constexpr int64_t kStemChannels = 4;

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool is_entry_transpose(const Graph& g, const Node& n) {
  if (!is_default(n, "Transpose") || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  if (n.attr_ints("perm") != std::vector<int64_t>{0, 2, 3, 1}) return false;
  const ValueInfo& x = g.value(n.inputs[0]).info;
  return x.rank_known && x.shape.size() == 4 && float_type(x.dtype) && !g.value(n.inputs[0]).constant;
}

// W [M, kH, kW, C] -> [M, kH, kW, cp] with zeros in channels C..cp-1.
Tensor pad_weight(const Tensor& w, int64_t cp) {
  const int64_t c = w.dim(3), rows = w.numel() / c;
  Tensor out = Tensor::zeros(w.dtype(), {w.dim(0), w.dim(1), w.dim(2), cp});
  const size_t es = dtype_size(w.dtype());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(r * cp) * es,
                static_cast<const char*>(w.raw()) + static_cast<size_t>(r * c) * es, static_cast<size_t>(c) * es);
  return out;
}

// Every reader a group-1 NhwcFusedConv reading the entry as X only, with a constant 4-D W of C
// channels.
bool stem_readers(const Graph& g, const Matcher& m, ValueId entry, int64_t c) {
  const std::vector<int32_t> readers = m.readers(entry);
  if (readers.empty()) return false;
  for (int32_t r : readers) {
    const Node& n = g.nodes()[static_cast<size_t>(r)];
    if (n.domain != "ai.gpuopt" || n.op_type != "NhwcFusedConv" || n.attr_i("group", 1) != 1) return false;
    if (n.inputs.size() < 2 || n.inputs[0] != entry) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] == entry) return false;
    const Value& w = g.value(n.inputs[1]);
    if (!w.constant || w.constant->rank() != 4 || w.constant->dim(3) != c || !float_type(w.constant->dtype())) return false;
  }
  return true;
}

// v = DequantizeLinear(QuantizeLinear(u)) with one constant per-tensor scale and zero point (int8
// or uint8), each read only by the next and the scale of v's float type: the Q node, else null.
const Node* round_trip(const Graph& g, const Matcher& m, ValueId v, const Node** dq_out) {
  const Node* dq = m.producer(v, "DequantizeLinear");
  if (!dq || dq->inputs.size() < 2 || dq->outputs.size() != 1 || !m.sole_reader(v, "Transpose")) return nullptr;
  const Node* q = m.producer(dq->inputs[0], "QuantizeLinear");
  if (!q || q->inputs.size() < 2 || q->outputs.size() != 1 || !m.sole_reader(dq->inputs[0], "DequantizeLinear")) return nullptr;
  if (q->attr_i("saturate", 1) != 1 || q->attr_i("output_dtype", 0) != 0 || q->attr_i("block_size", 0) != 0) return nullptr;
  for (size_t k = 1; k < 3; ++k)
    if (!same_scalar(g, k < q->inputs.size() ? q->inputs[k] : kNoValue, k < dq->inputs.size() ? dq->inputs[k] : kNoValue))
      return nullptr;
  const Value& s = g.value(q->inputs[1]);
  if (!s.constant || s.constant->numel() != 1 || s.constant->dtype() != g.value(v).info.dtype) return nullptr;
  if (q->inputs.size() > 2 && q->inputs[2] != kNoValue) {
    const Value& z = g.value(q->inputs[2]);
    if (!z.constant || z.constant->numel() != 1 || (z.constant->dtype() != DType::I8 && z.constant->dtype() != DType::U8))
      return nullptr;
  }
  if (g.value(q->inputs[0]).info.dtype != g.value(v).info.dtype) return nullptr;
  *dq_out = dq;
  return q;
}

}  // namespace

Result<PassStats> pack_nhwc_entries(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    if (!is_entry_transpose(*g, g->nodes()[i])) continue;
    const ValueId entry = g->nodes()[i].outputs[0];
    ValueId x = g->nodes()[i].inputs[0];
    const Node* dq = nullptr;
    const Node* q = round_trip(*g, m, x, &dq);
    std::vector<ValueId> quant;  // y_scale, y_zero_point
    if (q) {
      quant = {q->inputs[1], q->inputs.size() > 2 ? q->inputs[2] : kNoValue};
      if (quant[1] == kNoValue) quant.pop_back();
      x = q->inputs[0];
    }
    const char* reader = q ? "QuantizeLinear" : "Transpose";
    const Node* cast = m.producer(x, "Cast");
    if (cast && !(cast->inputs.size() == 1 && cast->attr("to") && m.sole_reader(x, reader) &&
                  float_type(g->value(cast->inputs[0]).info.dtype)))
      cast = nullptr;
    const int64_t c = g->value(x).info.shape[1];
    const bool pad = dim_is_known(c) && c < kStemChannels && !g->value(entry).is_graph_output &&
                     stem_readers(*g, m, entry, c);
    if (!cast && !pad && !q) continue;
    if (q) {
      m.mark(q);
      m.mark(dq);
    }
    AttributeMap attrs;
    if (cast) {
      attrs["to"] = *cast->attr("to");
      x = cast->inputs[0];
      m.mark(cast);
    }
    if (pad) {
      Attribute ch;
      ch.kind = Attribute::Kind::kInt;
      ch.i = kStemChannels;
      attrs["channels"] = ch;
      for (int32_t r : m.readers(entry)) {
        Node& conv = g->nodes()[static_cast<size_t>(r)];
        const Tensor& w = *g->value(conv.inputs[1]).constant;
        conv.inputs[1] = g->add_constant(conv.name + "/w_padded", pad_weight(w, kStemChannels));
      }
    }
    Node& t = g->nodes()[i];
    t.op = *op_from_name("ToNhwc");
    t.op_type = "ToNhwc";
    t.domain = "ai.gpuopt";
    t.inputs = {x};
    t.inputs.insert(t.inputs.end(), quant.begin(), quant.end());
    t.attrs = std::move(attrs);
    ++stats.rewritten;
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  g->rebuild_producers();
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
