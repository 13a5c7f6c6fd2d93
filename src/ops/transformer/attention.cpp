// Attention (opsets 23 and 24): CPU reference of scaled dot-product attention with MHA/GQA/MQA
// heads, 3-D or 4-D inputs, KV cache (past_key/past_value -> present_key/present_value),
// attn_mask (bool or additive, broadcast, last dim padded to the total length), is_causal,
// nonpad_kv_seqlen (opset 24), scale, softcap and the qk_matmul_output output. Follows the ONNX
// reference (onnx/reference/ops/op_attention.py) in double, rounding once per output.
//
//   scores = softcap(Q K^T * scale) + bias      bias: mask, causal and padding terms (-inf = masked)
//   Y      = softmax(scores) V
//
// qk_matmul_output_mode follows the spec text: 0 raw Q K^T * scale, 1 after softcap, 2 after the
// bias, 3 after softmax. (The reference also returns the softcapped value for mode 0; no node test
// covers that combination.) A row whose every score is -inf gives NaN, as numpy's softmax does.
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"

#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

constexpr size_t kQ = 0, kK = 1, kV = 2, kMask = 3, kPastK = 4, kPastV = 5, kNonpad = 6;
constexpr size_t kY = 0, kPresentK = 1, kPresentV = 2, kQkOut = 3;

// Sizes in the 4-D [batch, heads, seq, head_size] view (3-D inputs are reshaped/transposed to it).
struct AttnDims {
  bool three_d = false;
  int64_t batch = kUnknownDim, q_heads = kUnknownDim, kv_heads = kUnknownDim;
  int64_t q_seq = kUnknownDim, kv_seq = kUnknownDim, past = 0, total = kUnknownDim;
  int64_t head = kUnknownDim, k_head = kUnknownDim, v_head = kUnknownDim;
};

int64_t div_known(int64_t a, int64_t b) {
  return dim_is_known(a) && b > 0 ? a / b : kUnknownDim;
}
int64_t add_known(int64_t a, int64_t b) {
  return dim_is_known(a) && dim_is_known(b) ? a + b : kUnknownDim;
}
bool differ(int64_t a, int64_t b) {
  return dim_is_known(a) && dim_is_known(b) && a != b;
}

// Works on shapes only, so it serves load-time inference (dims may be unknown) and the kernel.
template <class Ctx>
Result<AttnDims> attn_dims(const Ctx& ctx, const Shape& q, const Shape& k, const Shape& v, const Shape* past_k,
                           const Shape* past_v) {
  AttnDims d;
  if (q.size() != k.size() || q.size() != v.size())
    return ctx.error("Q {}, K {} and V {} must have the same rank", shape_to_string(q), shape_to_string(k),
                     shape_to_string(v));
  const int64_t qh_attr = ctx.node.attr_i("q_num_heads", 0), kvh_attr = ctx.node.attr_i("kv_num_heads", 0);
  if (q.size() == 3) {
    if (qh_attr <= 0 || kvh_attr <= 0)
      return ctx.error("3-D Q/K/V need positive q_num_heads and kv_num_heads attributes (got {} and {})", qh_attr,
                       kvh_attr);
    d.three_d = true;
    d.q_heads = qh_attr;
    d.kv_heads = kvh_attr;
    d.q_seq = q[1];
    d.kv_seq = k[1];
    const struct {
      int64_t hidden, heads;
      const char* what;
      int64_t* out;
    } splits[] = {{q[2], qh_attr, "Q", &d.head}, {k[2], kvh_attr, "K", &d.k_head}, {v[2], kvh_attr, "V", &d.v_head}};
    for (const auto& s : splits) {
      if (dim_is_known(s.hidden) && s.hidden % s.heads != 0)
        return ctx.error("{} hidden size {} is not divisible by {} heads", s.what, s.hidden, s.heads);
      *s.out = div_known(s.hidden, s.heads);
    }
  } else if (q.size() == 4) {
    d.q_heads = q[1];
    d.kv_heads = k[1];
    d.q_seq = q[2];
    d.kv_seq = k[2];
    d.head = q[3];
    d.k_head = k[3];
    d.v_head = v[3];
    if (differ(v[1], k[1])) return ctx.error("K has {} heads but V has {}", k[1], v[1]);
    if (qh_attr > 0 && differ(qh_attr, d.q_heads))
      return ctx.error("q_num_heads {} does not match Q's dim 1 ({})", qh_attr, d.q_heads);
    if (kvh_attr > 0 && differ(kvh_attr, d.kv_heads))
      return ctx.error("kv_num_heads {} does not match K's dim 1 ({})", kvh_attr, d.kv_heads);
  } else {
    return ctx.error("Q must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size]; got {}",
                     shape_to_string(q));
  }
  d.batch = q[0];
  if (differ(k[0], q[0]) || differ(v[0], q[0]))
    return ctx.error("batch sizes differ: Q {}, K {}, V {}", q[0], k[0], v[0]);
  const size_t seq_axis = q.size() - 2;  // 1 for 3-D, 2 for 4-D
  if (differ(k[seq_axis], v[seq_axis]))
    return ctx.error("K and V sequence lengths differ ({} vs {})", k[seq_axis], v[seq_axis]);
  if (differ(d.head, d.k_head)) return ctx.error("Q head size {} differs from K head size {}", d.head, d.k_head);
  if (dim_is_known(d.q_heads) && dim_is_known(d.kv_heads) && (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0))
    return ctx.error("q_num_heads {} is not a multiple of kv_num_heads {}", d.q_heads, d.kv_heads);
  if ((past_k == nullptr) != (past_v == nullptr)) return ctx.error("past_key and past_value must be given together");
  d.past = 0;
  if (past_k) {
    const Shape& pk = *past_k;
    const Shape& pv = *past_v;
    if (pk.size() != 4 || pv.size() != 4)
      return ctx.error("past_key {} and past_value {} must be 4-D [batch, kv_heads, past_seq, head_size]",
                       shape_to_string(pk), shape_to_string(pv));
    if (differ(pk[0], d.batch) || differ(pk[1], d.kv_heads) || differ(pk[3], d.k_head))
      return ctx.error("past_key {} does not match [batch {}, kv_heads {}, *, head_size {}]", shape_to_string(pk),
                       d.batch, d.kv_heads, d.k_head);
    if (differ(pv[0], d.batch) || differ(pv[1], d.kv_heads) || differ(pv[2], pk[2]) || differ(pv[3], d.v_head))
      return ctx.error("past_value {} does not match [batch {}, kv_heads {}, {}, v_head_size {}]", shape_to_string(pv),
                       d.batch, d.kv_heads, pk[2], d.v_head);
    d.past = pk[2];
  }
  d.total = d.past == 0 ? d.kv_seq : add_known(d.past, d.kv_seq);  // keeps a symbolic kv length
  return d;
}

bool qkv_packed(const Node& n) {
  return n.attr_i("qkv_packed", 0) != 0;
}

// The widths of Q's and of K's (= V's) column ranges in a packed [B, S, W] tensor: W split into
// q_num_heads + 2 * kv_num_heads heads of one size. Unknown W gives unknown widths.
template <class Ctx>
Result<std::pair<int64_t, int64_t>> packed_widths(const Ctx& ctx, const Shape& qkv) {
  const int64_t hq = ctx.node.attr_i("q_num_heads", 0), hkv = ctx.node.attr_i("kv_num_heads", 0);
  if (qkv.size() != 3) return ctx.error("qkv_packed: the packed input must be 3-D [batch, seq, hidden]; got {}",
                                        shape_to_string(qkv));
  if (hq <= 0 || hkv <= 0)
    return ctx.error("qkv_packed needs positive q_num_heads and kv_num_heads (got {} and {})", hq, hkv);
  if (!dim_is_known(qkv[2])) return std::pair<int64_t, int64_t>{kUnknownDim, kUnknownDim};
  if (qkv[2] % (hq + 2 * hkv) != 0)
    return ctx.error("qkv_packed: hidden size {} is not divisible into {} + 2 x {} heads", qkv[2], hq, hkv);
  const int64_t d = qkv[2] / (hq + 2 * hkv);
  return std::pair<int64_t, int64_t>{hq * d, hkv * d};
}

// Q, K and V of a packed node as the three column ranges' shapes.
Status unpack_info(const InferContext& ctx, ValueInfo* q, ValueInfo* k, ValueInfo* v) {
  if (ctx.has_input(kK) || ctx.has_input(kV)) return ctx.error("qkv_packed: K and V must be absent (Q holds all three)");
  if (ctx.has_input(kPastK) || ctx.has_input(kPastV)) return ctx.error("qkv_packed cannot be combined with past_key/past_value");
  const ValueInfo& x = ctx.in(kQ);
  for (ValueInfo* p : {q, k, v}) {  // dtype and shape only: no constant value, no shape value
    p->dtype = x.dtype;
    p->rank_known = x.rank_known;
    p->shape = x.shape;
  }
  if (!q->rank_known) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(auto w, packed_widths(ctx, q->shape));
  q->shape[2] = w.first;
  k->shape[2] = v->shape[2] = w.second;
  return Status::Ok();
}

// Columns [from, from + n) of a contiguous [B, S, W] tensor.
Tensor columns_of(const Tensor& x, int64_t from, int64_t n) {
  const int64_t rows = x.dim(0) * x.dim(1), w = x.dim(2);
  const size_t es = dtype_size(x.dtype());
  Tensor out = Tensor::empty(x.dtype(), {x.dim(0), x.dim(1), n});
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(src + (r * w + from) * static_cast<int64_t>(es), n * static_cast<int64_t>(es), dst + r * n * static_cast<int64_t>(es));
  return out;
}

const Shape* shape_or_null(const InferContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.in(i).rank_known ? &ctx.in(i).shape : nullptr;
}

void set_out(InferContext& ctx, size_t o, DType dt, Shape s) {
  if (o >= ctx.outputs.size()) return;
  ctx.outputs[o].dtype = dt;
  ctx.outputs[o].rank_known = true;
  ctx.outputs[o].shape = std::move(s);
}

}  // namespace

Status infer_Attention(InferContext& ctx) {
  const bool packed = qkv_packed(ctx.node);
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, packed ? 1 : 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, kQ, "Q"));
  ValueInfo uq, uk, uv;  // packed: the three column ranges
  if (packed) {
    GPUOPT_RETURN_IF_ERROR(unpack_info(ctx, &uq, &uk, &uv));
  } else {
    GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, kK, "K"));
    GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, kV, "V"));
    GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, kQ, kK));
  }
  const bool has_past = ctx.has_input(kPastK) || ctx.has_input(kPastV);
  if (has_past) {
    if (!ctx.has_input(kPastK) || !ctx.has_input(kPastV))
      return ctx.error("past_key and past_value must be given together");
    GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, kK, kPastK));
    GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, kV, kPastV));
  }
  if (ctx.has_input(kMask)) {
    const DType m = ctx.in(kMask).dtype;
    if (m != DType::Undefined && m != DType::Bool && !dtype_is_float(m) && !dtype_is_integer(m))
      return ctx.error("attn_mask has dtype {}; expected bool or a numeric type", dtype_name(m));
  }
  if (ctx.has_input(kNonpad)) {
    if (has_past) return ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
    const ValueInfo& n = ctx.in(kNonpad);
    if (n.dtype != DType::Undefined && n.dtype != DType::I64)
      return ctx.error("nonpad_kv_seqlen has dtype {}; expected i64", dtype_name(n.dtype));
    if (n.rank_known && n.shape.size() != 1)
      return ctx.error("nonpad_kv_seqlen must be 1-D [batch]; got {}", shape_to_string(n.shape));
  }
  const int64_t mode = ctx.node.attr_i("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return ctx.error("qk_matmul_output_mode {} is not 0, 1, 2 or 3", mode);
  if (ctx.node.attr_f("softcap", 0.0f) < 0) return ctx.error("softcap {} is negative", ctx.node.attr_f("softcap", 0.0f));
  if (ctx.node.has_attr("softmax_precision")) {
    const int64_t p = ctx.node.attr_i("softmax_precision", 1);
    const std::optional<DType> pd = dtype_from_onnx(static_cast<int>(p));
    if (!pd || !dtype_is_float(*pd)) return ctx.error("softmax_precision {} is not a float type", p);
  }
  const ValueInfo &q = packed ? uq : ctx.in(kQ), &k = packed ? uk : ctx.in(kK), &v = packed ? uv : ctx.in(kV);
  const DType qt = q.dtype, vt = v.dtype;
  for (size_t o = 0; o < ctx.outputs.size(); ++o) ctx.outputs[o].dtype = o == kPresentV ? vt : qt;
  if (!q.rank_known || !k.rank_known || !v.rank_known) return Status::Ok();
  const Shape* pk = shape_or_null(ctx, kPastK);
  const Shape* pv = shape_or_null(ctx, kPastV);
  if (has_past && (!pk || !pv)) return Status::Ok();  // past ranks unknown yet: outputs stay unknown
  GPUOPT_ASSIGN_OR_RETURN(AttnDims d, attn_dims(ctx, q.shape, k.shape, v.shape, pk, pv));
  if (ctx.has_input(kMask) && ctx.in(kMask).rank_known) {
    const Shape& m = ctx.in(kMask).shape;
    const Shape full = {d.batch, d.q_heads, d.q_seq, d.total};
    if (m.empty() || m.size() > 4)
      return ctx.error("attn_mask {} must have rank 1 to 4 (broadcast to [batch, q_heads, q_seq, total_seq])",
                       shape_to_string(m));
    if (dim_is_known(m.back()) && dim_is_known(d.total) && m.back() > d.total)
      return ctx.error("attn_mask last dim {} exceeds the total sequence length {}", m.back(), d.total);
    Shape lead(m.begin(), m.end() - 1), full_lead(full.begin() + (4 - static_cast<int64_t>(m.size())), full.end() - 1);
    if (!broadcastable_to(lead, full_lead))
      return ctx.error("attn_mask {} does not broadcast to [batch {}, q_heads {}, q_seq {}, total_seq {}]",
                       shape_to_string(m), d.batch, d.q_heads, d.q_seq, d.total);
  }
  if (ctx.has_input(kNonpad) && ctx.in(kNonpad).rank_known && differ(ctx.in(kNonpad).shape[0], d.batch))
    return ctx.error("nonpad_kv_seqlen has {} values for batch {}", ctx.in(kNonpad).shape[0], d.batch);
  const int64_t y_hidden = dim_is_known(d.v_head) ? d.q_heads * d.v_head : kUnknownDim;
  set_out(ctx, kY, qt, d.three_d ? Shape{d.batch, d.q_seq, y_hidden} : Shape{d.batch, d.q_heads, d.q_seq, d.v_head});
  set_out(ctx, kPresentK, qt, {d.batch, d.kv_heads, d.total, d.k_head});
  set_out(ctx, kPresentV, vt, {d.batch, d.kv_heads, d.total, d.v_head});
  set_out(ctx, kQkOut, qt, {d.batch, d.q_heads, d.q_seq, d.total});
  return Status::Ok();
}

namespace {

// x as doubles in the 4-D [B, H, S, Dh] layout (3-D [B, S, H*Dh] is reshaped and transposed).
std::vector<double> to_bhsd(const Tensor& x, bool three_d, int64_t heads) {
  std::vector<double> v = nn::to_doubles(x);
  if (!three_d) return v;
  const int64_t B = x.dim(0), S = x.dim(1), Dh = heads ? x.dim(2) / heads : 0;
  std::vector<double> out(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < Dh; ++e) out[((b * heads + h) * S + s) * Dh + e] = v[((b * S + s) * heads + h) * Dh + e];
  return out;
}

// [B, H, past + S, Dh]: the past cache followed by the new entries along the sequence axis.
std::vector<double> concat_seq(const std::vector<double>& past, const std::vector<double>& cur, int64_t BH, int64_t P,
                               int64_t S, int64_t Dh) {
  std::vector<double> out(static_cast<size_t>(BH * (P + S) * Dh));
  for (int64_t bh = 0; bh < BH; ++bh) {
    std::copy_n(past.begin() + bh * P * Dh, P * Dh, out.begin() + bh * (P + S) * Dh);
    std::copy_n(cur.begin() + bh * S * Dh, S * Dh, out.begin() + bh * (P + S) * Dh + P * Dh);
  }
  return out;
}

// Additive bias for (b, h, i, j) over [B, Hq, Sq, T]: attn_mask (bool: false -> -inf; numeric:
// added; columns past the mask's last dim -> -inf), causal (j > i + past -> -inf) and padding
// (j >= nonpad_kv_seqlen[b] -> -inf). Made one row at a time, so memory stays O(T) per row
// rather than O(B * Hq * Sq * T).
class AttentionBias {
 public:
  AttentionBias(const KernelContext& ctx, const AttnDims& d)
      : total_(d.total), past_(d.past), causal_(ctx.node.attr_i("is_causal", 0) != 0) {
    if (ctx.has_input(kNonpad)) nonpad_ = ctx.in(kNonpad).to_i64_vector();
    if (!ctx.has_input(kMask)) return;
    const Tensor& m = ctx.in(kMask);
    has_mask_ = true;
    is_bool_ = m.dtype() == DType::Bool;
    mask_ = nn::to_doubles(m);
    // Strides over the right-aligned [B, H, Sq, L] view; 0 where the mask broadcasts.
    Shape ms(static_cast<size_t>(4 - m.rank()), 1);
    ms.insert(ms.end(), m.shape().begin(), m.shape().end());
    len_ = ms[3];
    const int64_t st1 = ms[2] * len_, st0 = ms[1] * st1;
    s0_ = ms[0] == 1 ? 0 : st0;
    s1_ = ms[1] == 1 ? 0 : st1;
    s2_ = ms[2] == 1 ? 0 : len_;
  }

  void fill(int64_t b, int64_t h, int64_t i, double* row) const {
    const double ninf = -std::numeric_limits<double>::infinity();
    std::fill(row, row + total_, 0.0);
    if (has_mask_) {
      const double* mrow = mask_.data() + b * s0_ + h * s1_ + i * s2_;
      for (int64_t j = 0; j < total_; ++j)
        row[j] = j >= len_ ? ninf : is_bool_ ? (mrow[j] != 0 ? 0.0 : ninf) : mrow[j];
    }
    if (causal_)
      for (int64_t j = i + past_ + 1; j < total_; ++j) row[j] += ninf;
    if (!nonpad_.empty())
      for (int64_t j = std::max<int64_t>(nonpad_[static_cast<size_t>(b)], 0); j < total_; ++j) row[j] += ninf;
  }

 private:
  int64_t total_, past_;
  bool causal_;
  bool has_mask_ = false, is_bool_ = false;
  std::vector<double> mask_;
  int64_t len_ = 0, s0_ = 0, s1_ = 0, s2_ = 0;
  std::vector<int64_t> nonpad_;
};

}  // namespace

Status cpu_Attention(KernelContext& ctx) {
  Tensor pq, pk, pv;  // qkv_packed: the three column ranges of input 0
  const bool packed = qkv_packed(ctx.node);
  if (packed) {
    const Tensor& x = ctx.in(kQ);
    GPUOPT_ASSIGN_OR_RETURN(auto w, packed_widths(ctx, x.shape()));
    pq = columns_of(x, 0, w.first);
    pk = columns_of(x, w.first, w.second);
    pv = columns_of(x, w.first + w.second, w.second);
  }
  const Tensor &q = packed ? pq : ctx.in(kQ), &k = packed ? pk : ctx.in(kK), &v = packed ? pv : ctx.in(kV);
  const bool has_past = ctx.has_input(kPastK);
  GPUOPT_ASSIGN_OR_RETURN(AttnDims d, attn_dims(ctx, q.shape(), k.shape(), v.shape(),
                                                has_past ? &ctx.in(kPastK).shape() : nullptr,
                                                has_past ? &ctx.in(kPastV).shape() : nullptr));
  if (ctx.has_input(kNonpad)) {
    const std::vector<int64_t> n = ctx.in(kNonpad).to_i64_vector();
    for (size_t b = 0; b < n.size(); ++b)
      if (n[b] < 0 || n[b] > d.total)
        return ctx.error("nonpad_kv_seqlen[{}] = {} is outside [0, {}]", b, n[b], d.total);
  }
  const int64_t B = d.batch, Hq = d.q_heads, Hkv = d.kv_heads, Sq = d.q_seq, S = d.kv_seq, P = d.past, T = d.total;
  const int64_t Dh = d.head, Dv = d.v_head, group = Hq / Hkv;
  const std::vector<double> qv = to_bhsd(q, d.three_d, Hq);
  std::vector<double> kv = to_bhsd(k, d.three_d, Hkv), vv = to_bhsd(v, d.three_d, Hkv);
  if (has_past) {
    kv = concat_seq(nn::to_doubles(ctx.in(kPastK)), kv, B * Hkv, P, S, Dh);
    vv = concat_seq(nn::to_doubles(ctx.in(kPastV)), vv, B * Hkv, P, S, Dv);
  }
  const double scale = ctx.node.has_attr("scale") ? static_cast<double>(ctx.node.attr_f("scale", 1.0f))
                                                  : 1.0 / std::sqrt(static_cast<double>(Dh));
  const double softcap = ctx.node.attr_f("softcap", 0.0f);
  const int64_t mode = ctx.node.attr_i("qk_matmul_output_mode", 0);
  const bool want_qk = ctx.outputs.size() > kQkOut && ctx.outputs[kQkOut];
  const AttentionBias bias(ctx, d);

  std::vector<double> y(static_cast<size_t>(B * Hq * Sq * Dv)), qk;
  if (want_qk) qk.resize(static_cast<size_t>(B * Hq * Sq * T));
  std::vector<double> row(static_cast<size_t>(T)), br(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;  // GQA: query heads share KV heads in consecutive groups
      const double* kb = kv.data() + (b * Hkv + hk) * T * Dh;
      const double* vb = vv.data() + (b * Hkv + hk) * T * Dv;
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t r = (b * Hq + h) * Sq + i;
        const double* qr = qv.data() + r * Dh;
        bias.fill(b, h, i, br.data());
        double* qko = want_qk ? qk.data() + r * T : nullptr;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t e = 0; e < Dh; ++e) s += qr[e] * kb[j * Dh + e];
          s *= scale;
          if (qko && mode == 0) qko[j] = s;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          if (qko && mode == 1) qko[j] = s;
          s += br[j];
          if (qko && mode == 2) qko[j] = s;
          row[j] = s;
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < T; ++j) mx = std::max(mx, row[j]);
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += row[j] = std::exp(row[j] - mx);  // all -inf: NaN, as numpy
        for (int64_t j = 0; j < T; ++j) row[j] /= sum;
        if (qko && mode == 3) std::copy(row.begin(), row.end(), qko);
        double* yr = y.data() + r * Dv;
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < Dv; ++e) yr[e] += row[j] * vb[j * Dv + e];
      }
    }
  // gpuopt's own attribute, written by fuse_attention for the exporters' NaN guard after the
  // Softmax (torch's SDPA: a row whose every key is masked gives 0, not NaN).
  if (ctx.node.attr_i("nan_to_zero", 0) != 0)
    for (double& e : y)
      if (std::isnan(e)) e = 0.0;
  if (d.three_d) {  // [B, Hq, Sq, Dv] -> [B, Sq, Hq * Dv]
    std::vector<double> t(y.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Sq; ++i)
          for (int64_t e = 0; e < Dv; ++e) t[((b * Sq + i) * Hq + h) * Dv + e] = y[((b * Hq + h) * Sq + i) * Dv + e];
    y.swap(t);
  }
  nn::from_doubles(ctx.out(kY), y);
  if (ctx.outputs.size() > kPresentK && ctx.outputs[kPresentK]) nn::from_doubles(ctx.out(kPresentK), kv);
  if (ctx.outputs.size() > kPresentV && ctx.outputs[kPresentV]) nn::from_doubles(ctx.out(kPresentV), vv);
  if (want_qk) nn::from_doubles(ctx.out(kQkOut), qk);
  return Status::Ok();
}

// Two matmuls (2 * T * (Dh + Dv) per query row and head) plus about 5 per score for scale,
// bias and softmax. Q has B*Hq*Sq*Dh elements and Y has B*Hq*Sq*Dv, whatever their rank.
double flops_Attention(const FlopsContext& ctx) {
  const bool packed = qkv_packed(ctx.node);
  const ValueInfo* q = nn::flops_in(ctx, kQ);
  const ValueInfo* k = packed ? q : nn::flops_in(ctx, kK);  // packed: K's sequence is Q's
  const ValueInfo* y = nn::flops_out(ctx, kY);
  const double heads = std::max<double>(1, static_cast<double>(ctx.node.attr_i("q_num_heads", 1)));
  const double kv_heads = std::max<double>(1, static_cast<double>(ctx.node.attr_i("kv_num_heads", 1)));
  // Q's share of a packed input's elements: q_heads of its q_heads + 2 * kv_heads heads.
  const double qn = nn::est_numel(q) * (packed ? heads / (heads + 2 * kv_heads) : 1.0), yn = nn::est_numel(y);
  if (qn < 0 || yn < 0 || !k || !k->rank_known) return 0;
  const bool three_d = q->shape.size() == 3;
  const double dh = packed ? nn::est_dim(q, 2) / (heads + 2 * kv_heads) : three_d ? nn::est_dim(q, 2) / heads : nn::est_dim(q, 3);
  double T = nn::est_dim(k, three_d ? 1 : 2);
  if (const ValueInfo* pk = nn::flops_in(ctx, kPastK); pk && pk->rank_known) T += nn::est_dim(pk, 2);
  return T * (2 * qn + 2 * yn + 5 * qn / std::max(dh, 1.0));
}

}  // namespace gpuopt
