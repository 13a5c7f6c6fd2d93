// com.microsoft Attention and MultiHeadAttention as standard nodes (see contrib_ops.cpp).
//
//   Attention(input, weights, bias, mask_index, past, attention_bias, past_sequence_length)
//     -> qkv = input @ weights + bias; Q, K, V = Split(qkv) (qkv_hidden_sizes, else thirds)
//        Y = ONNX Attention(Q, K, V, mask) with q_num_heads = kv_num_heads = num_heads (3-D form)
//   MultiHeadAttention(query, key, value, bias, key_padding_mask, attention_bias, ...)
//     -> query/key/value [B, S, D]; packed QKV [B, S, N, 3, H] or packed KV [B, L, N, 2, H]
//        (Split on the "3"/"2" axis); key/value [B, N, L, H] (the 4-D form, query split to heads);
//        bias [D + D + Dv] added to Q, K, V.
//
// The mask is made additive exactly as ONNX Runtime's CPU kernel does (PrepareMask): a raw mask
// ([B, T], [B, S, T], or Attention's Megatron [B, 1, M, M] cut to [S, T]) adds 0 where the value
// is > 0 and mask_filter_value (default -10000) elsewhere; key lengths [B] mask the keys at and
// after each length, [2B] (end positions, then start positions) also those before the start.
// attention_bias [B|1, N|1, S, T] is added to it. unidirectional is ONNX's is_causal (ONNX
// Runtime writes the lowest float there, which softmax takes as -inf: every row keeps its diagonal).
// A KV cache (past, past_key/past_value, present outputs), do_rotary, [3B + 2] mask indices and the
// qk output are refused, naming the node.
#include "onnx/contrib_emit.h"

namespace gpuopt::onnx_detail {
namespace {

constexpr int64_t kOnnxInt32 = 6;  // TensorProto.INT32

// The additive mask ([B, 1, 1 or S, T], dtype dt) for mask input m; `q` gives the batch, `kv` and
// its axis `kv_seq_axis` the key length T. Written with ops the CUDA backend runs (int32 compares,
// Where), so a CUDA graph is not cut by a CPU node, and exact whatever the precision.
Result<ValueId> additive_mask(Emitter& e, ValueId m, ValueId q, ValueId kv, int64_t kv_seq_axis, bool allow_4d,
                              DType dt, float filter) {
  const ValueInfo mi = e.info(m);
  if (!mi.rank_known) return e.error("the rank of the mask input is not known at load time");
  if (mi.dtype != DType::I32) return e.error("the mask has dtype {}; expected int32", dtype_name(mi.dtype));
  const int64_t r = static_cast<int64_t>(mi.shape.size());
  if (r < 1 || r > (allow_4d ? 4 : 3))
    return e.error("a mask of shape {} is not supported (1-D [batch] or [2 * batch], 2-D [batch, total], 3-D [batch, "
                   "seq, total]{})",
                   e.graph().shape_string(mi.shape), allow_4d ? ", 4-D [batch, 1, max_seq, max_seq]" : "");
  const ValueId zero = e.scalar(dt, 0.0), masked = e.scalar(dt, filter);
  ValueId add = kNoValue;
  if (r == 1) {
    const int64_t md = mi.shape[0], b = e.dim(q, 0);
    const bool key_len = md == b && md != kUnknownDim;
    const bool end_start = dim_is_known(md) && dim_is_known(b) && md == 2 * b;
    if (!key_len && !end_start) {
      if (dim_is_known(md) && dim_is_known(b) && md == 3 * b + 2)
        return e.unsupported("a mask index of shape [3 * batch + 2] is not supported");
      return e.error("a 1-D mask index {} is neither [batch] nor [2 * batch] (batch {})", e.graph().shape_string(mi.shape),
                     e.graph().symbol_name(b));
    }
    GPUOPT_ASSIGN_OR_RETURN(ValueId t, e.dim_scalar(kv, kv_seq_axis));
    GPUOPT_ASSIGN_OR_RETURN(ValueId t32, e.op(Op::Cast, {t}, {{"to", int_attr(kOnnxInt32)}}));
    GPUOPT_ASSIGN_OR_RETURN(ValueId j, e.op(Op::Range, {e.scalar(DType::I32, 0), t32, e.scalar(DType::I32, 1)}));
    if (key_len) {
      GPUOPT_ASSIGN_OR_RETURN(ValueId end, e.reshape(m, {-1, 1}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId before_end, e.op(Op::Less, {j, end}));
      GPUOPT_ASSIGN_OR_RETURN(add, e.op(Op::Where, {before_end, zero, masked}));
    } else {
      GPUOPT_ASSIGN_OR_RETURN(ValueId both, e.reshape(m, {2, -1, 1}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId end, e.op(Op::Gather, {both, e.i64_scalar(0)}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId start, e.op(Op::Gather, {both, e.i64_scalar(1)}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId before_end, e.op(Op::Less, {j, end}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId before_start, e.op(Op::Less, {j, start}));
      GPUOPT_ASSIGN_OR_RETURN(ValueId from_start, e.op(Op::Where, {before_start, masked, zero}));
      GPUOPT_ASSIGN_OR_RETURN(add, e.op(Op::Where, {before_end, from_start, masked}));
    }
    return e.reshape(add, {0, 1, 1, -1});
  }
  GPUOPT_ASSIGN_OR_RETURN(ValueId keep, e.op(Op::Greater, {m, e.scalar(DType::I32, 0)}));
  GPUOPT_ASSIGN_OR_RETURN(add, e.op(Op::Where, {keep, zero, masked}));
  if (r == 2) return e.reshape(add, {0, 1, 1, -1});
  if (r == 3) return e.unsqueeze(add, {1});
  // Megatron's [B, 1, max_seq, max_seq]: rows and columns 0..S (no past: T = S).
  GPUOPT_ASSIGN_OR_RETURN(ValueId shape, e.op(Op::Shape, {q}));
  GPUOPT_ASSIGN_OR_RETURN(ValueId s, e.op(Op::Gather, {shape, e.i64s({1, 1})}));
  return e.op(Op::Slice, {add, e.i64s({0, 0}), s, e.i64s({2, 3})});
}

// The mask (optional) plus attention_bias (optional): the ONNX Attention's attn_mask, or kNoValue.
Result<ValueId> attn_mask(Emitter& e, size_t mask_in, size_t bias_in, ValueId q, ValueId kv, int64_t kv_seq_axis,
                          bool allow_4d) {
  const DType dt = e.info(q).dtype;
  ValueId mask = kNoValue;
  if (e.has_in(mask_in)) {
    GPUOPT_ASSIGN_OR_RETURN(mask, additive_mask(e, e.in(mask_in), q, kv, kv_seq_axis, allow_4d, dt,
                                                e.attr_f("mask_filter_value", -10000.0f)));
  }
  if (!e.has_in(bias_in)) return mask;
  const int64_t br = e.rank(e.in(bias_in));
  if (br != 4) return e.error("attention_bias must be 4-D [batch or 1, heads or 1, seq, total]");
  if (mask == kNoValue) return e.in(bias_in);
  return e.op(Op::Add, {mask, e.in(bias_in)});
}

AttributeMap attention_attrs(const Emitter& e, int64_t heads, bool three_d) {
  AttributeMap a;
  if (three_d) {
    a["q_num_heads"] = int_attr(heads);
    a["kv_num_heads"] = int_attr(heads);
  }
  if (e.attr_i("unidirectional", 0) != 0) a["is_causal"] = int_attr(1);
  const float scale = e.attr_f("scale", 0.0f);
  if (scale != 0.0f) a["scale"] = float_attr(scale);
  return a;
}

Result<int64_t> num_heads(const Emitter& e) {
  const int64_t n = e.attr_i("num_heads", 0);
  if (n <= 0) return e.error("num_heads {} must be positive", n);
  return n;
}

// [B, S, N*H] packed along `axis` of a [B, S, N, parts, H] tensor -> `parts` values [B, S, N*H].
Result<std::vector<ValueId>> unpack(Emitter& e, ValueId x, size_t parts) {
  GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> p, e.op_n(Op::Split, {x}, parts, {{"axis", int_attr(3)}}));
  for (ValueId& v : p) {
    GPUOPT_ASSIGN_OR_RETURN(v, e.reshape(v, {0, 0, -1}));
  }
  return p;
}

}  // namespace

Result<std::vector<ValueId>> expand_contrib_attention(Emitter& e) {
  GPUOPT_RETURN_IF_ERROR(e.only_output0("present: a KV cache"));
  if (e.has_in(4)) return e.unsupported("input 4 (past: a KV cache) is not supported");
  if (e.has_in(6)) return e.unsupported("input 6 (past_sequence_length) is not supported");
  if (e.attr_i("do_rotary", 0) != 0) return e.unsupported("do_rotary=1 is not supported");
  if (e.attr_i("past_present_share_buffer", 0) != 0) return e.unsupported("past_present_share_buffer=1 is not supported");
  GPUOPT_ASSIGN_OR_RETURN(const int64_t heads, num_heads(e));
  if (!e.has_in(0) || !e.has_in(1)) return e.error("input and weights are required");
  const ValueId x = e.in(0);
  if (e.rank(x) != 3) return e.error("input must be 3-D [batch, seq, input_hidden]");
  GPUOPT_ASSIGN_OR_RETURN(ValueId qkv, e.op(Op::MatMul, {x, e.in(1)}));
  if (e.has_in(2)) {
    GPUOPT_ASSIGN_OR_RETURN(qkv, e.op(Op::Add, {qkv, e.in(2)}));
  }
  const std::vector<int64_t> sizes = e.attr_ints("qkv_hidden_sizes");
  std::vector<ValueId> split_in = {qkv};
  if (!sizes.empty()) {
    if (sizes.size() != 3 || sizes[0] <= 0 || sizes[2] <= 0 || sizes[0] != sizes[1])
      return e.error("qkv_hidden_sizes must be 3 positive sizes with Q's equal to K's");
    split_in.push_back(e.i64s(sizes));
  }
  GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> qkv3, e.op_n(Op::Split, split_in, 3, {{"axis", int_attr(2)}}));
  GPUOPT_ASSIGN_OR_RETURN(ValueId mask, attn_mask(e, 3, 5, qkv3[0], qkv3[1], 1, true));
  std::vector<ValueId> ins = {qkv3[0], qkv3[1], qkv3[2]};
  if (mask != kNoValue) ins.push_back(mask);
  GPUOPT_ASSIGN_OR_RETURN(ValueId y, e.op(Op::Attention, ins, attention_attrs(e, heads, true), e.node().outputs[0]));
  return std::vector<ValueId>{y};
}

Result<std::vector<ValueId>> expand_contrib_mha(Emitter& e) {
  GPUOPT_RETURN_IF_ERROR(e.only_output0("present_key, present_value, qk"));
  static const char* const kCache[] = {"past_key", "past_value", "past_sequence_length", "cache_indirection"};
  for (size_t i = 6; i < 10; ++i)
    if (e.has_in(i)) return e.unsupported("input {} ({}) is not supported", i, kCache[i - 6]);
  GPUOPT_ASSIGN_OR_RETURN(const int64_t heads, num_heads(e));
  if (!e.has_in(0)) return e.error("query is required");
  const int64_t qr = e.rank(e.in(0)), kr = e.has_in(1) ? e.rank(e.in(1)) : 0, vr = e.has_in(2) ? e.rank(e.in(2)) : 0;
  ValueId q = e.in(0), k = e.in(1), v = e.in(2);
  bool bnsh = false;  // key/value [B, N, L, H]
  if (qr == 5) {
    if (kr != 0 || vr != 0) return e.error("a packed QKV query [B, S, N, 3, H] takes no key or value");
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> p, unpack(e, q, 3));
    q = p[0], k = p[1], v = p[2];
  } else if (qr == 3 && kr == 5) {
    if (vr != 0) return e.error("a packed KV key [B, L, N, 2, H] takes no value");
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> p, unpack(e, k, 2));
    k = p[0], v = p[1];
  } else if (qr == 3 && kr == 3 && vr == 3) {
  } else if (qr == 3 && kr == 4 && vr == 4) {
    bnsh = true;
  } else {
    return e.error("query/key/value of ranks {}/{}/{} are not a supported form (3/3/3, 3/4/4 [B, N, L, H], packed "
                   "QKV 5/-/-, packed KV 3/5/-)",
                   qr, kr, vr);
  }
  if (e.has_in(3)) {
    if (bnsh) return e.unsupported("bias with a 4-D key/value [B, N, L, H] is not supported");
    const int64_t d = e.dim(q, -1), dv = e.dim(v, -1);
    if (!dim_is_known(d) || !dim_is_known(dv))
      return e.error("bias needs the query and value hidden sizes known at load time");
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> b,
                            e.op_n(Op::Split, {e.in(3), e.i64s({d, d, dv})}, 3, {{"axis", int_attr(0)}}));
    GPUOPT_ASSIGN_OR_RETURN(q, e.op(Op::Add, {q, b[0]}));
    GPUOPT_ASSIGN_OR_RETURN(k, e.op(Op::Add, {k, b[1]}));
    GPUOPT_ASSIGN_OR_RETURN(v, e.op(Op::Add, {v, b[2]}));
  }
  GPUOPT_ASSIGN_OR_RETURN(ValueId mask, attn_mask(e, 4, 5, q, k, bnsh ? 2 : 1, false));
  const std::string& out = e.node().outputs[0];
  if (!bnsh) {
    std::vector<ValueId> ins = {q, k, v};
    if (mask != kNoValue) ins.push_back(mask);
    GPUOPT_ASSIGN_OR_RETURN(ValueId y, e.op(Op::Attention, ins, attention_attrs(e, heads, true), out));
    return std::vector<ValueId>{y};
  }
  GPUOPT_ASSIGN_OR_RETURN(ValueId q4, e.reshape(q, {0, 0, heads, -1}));
  GPUOPT_ASSIGN_OR_RETURN(q4, e.transpose(q4, {0, 2, 1, 3}));
  std::vector<ValueId> ins = {q4, k, v};
  if (mask != kNoValue) ins.push_back(mask);
  GPUOPT_ASSIGN_OR_RETURN(ValueId y4, e.op(Op::Attention, ins, attention_attrs(e, heads, false)));
  GPUOPT_ASSIGN_OR_RETURN(ValueId y, e.transpose(y4, {0, 2, 1, 3}));
  GPUOPT_ASSIGN_OR_RETURN(y, e.reshape(y, {0, 0, -1}, out));
  return std::vector<ValueId>{y};
}

}  // namespace gpuopt::onnx_detail
