// RMSNormalization (opset 23) and RotaryEmbedding (opset 23): CPU reference. Both compute in
// double and round once to the output dtype, like the other reference kernels; they follow the
// ONNX reference implementation (onnx/reference/ops/op_rms_normalization.py and
// op_rotary_embedding.py), which generated the node tests. Attention is in transformer_attention.cpp.
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"

#include <cmath>

namespace gpuopt {

// ---- RMSNormalization ------------------------------------------------------------------------
//
//   Y = X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale
//
// scale broadcasts (numpy rules) to the normalised trailing shape X.shape[axis:].

Status infer_RMSNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "scale"));
  const int64_t stash = ctx.node.attr_i("stash_type", 1);
  const std::optional<DType> stash_dt = dtype_from_onnx(static_cast<int>(stash));
  if (!stash_dt || !nn::is_float_dtype(*stash_dt)) return ctx.error("stash_type {} is not a float type", stash);
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known) {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t axis = ctx.node.attr_i("axis", -1);
    if (!normalize_axis(&axis, rank))
      return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", -1), rank);
    const ValueInfo& s = ctx.in(1);
    const Shape normalized(x.shape.begin() + axis, x.shape.end());
    if (s.rank_known && !broadcastable_to(s.shape, normalized))
      return ctx.error("scale {} does not broadcast to the normalized shape {} (X {} from axis {})",
                       shape_to_string(s.shape), shape_to_string(normalized), shape_to_string(x.shape), axis);
  }
  ctx.outputs[0].dtype = x.dtype;
  ctx.outputs[0].rank_known = x.rank_known;
  ctx.outputs[0].shape = x.shape;
  return Status::Ok();
}

Status cpu_RMSNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", -1);
  GPUOPT_ASSERT(normalize_axis(&axis, x.rank()), "RMSNormalization axis");
  const double eps = ctx.node.attr_f("epsilon", 1e-5f);
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  const int64_t inner = nn::product(x.shape(), static_cast<size_t>(axis), x.shape().size());
  const int64_t outer = inner ? x.numel() / inner : 0;
  const std::vector<double> xv = nn::to_doubles(x), sc = nn::to_doubles(ctx.in(1));
  const std::vector<int64_t> so = broadcast_offsets(ctx.in(1).shape(), normalized);
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < outer; ++r) {
    const double* row = xv.data() + r * inner;
    double sq = 0;
    for (int64_t k = 0; k < inner; ++k) sq += row[k] * row[k];
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
    for (int64_t k = 0; k < inner; ++k) y[r * inner + k] = row[k] * inv * sc[so[k]];
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

// Square, sum, scale and multiply by the weight: about 4 per element.
double flops_RMSNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 4 * n;
}

// ---- RotaryEmbedding -------------------------------------------------------------------------
//
// input is [B, H, S, D] (4-D) or [B, S, H*D] (3-D, num_heads attribute required). The first
// rotary_embedding_dim (default D) channels of every head are rotated pairwise by the angle
// whose cos/sin come from the caches: rows cache[position_ids[b, s]] of a [max_pos, R/2] cache,
// or cache[b, s] of a [B, S, R/2] cache when position_ids is absent. Pairs are (k, k + R/2), or
// (2k, 2k + 1) with interleaved=1; the remaining channels pass through.

namespace {

struct RotaryDims {
  int64_t batch = kUnknownDim, seq = kUnknownDim, heads = kUnknownDim, head_size = kUnknownDim;
  int64_t rot = kUnknownDim;  // rotary_embedding_dim resolved (0 -> head_size)
};

template <class Ctx>
Result<RotaryDims> rotary_dims(const Ctx& ctx, const Shape& in) {
  RotaryDims d;
  const int64_t num_heads = ctx.node.attr_i("num_heads", 0);
  if (in.size() == 4) {
    d.batch = in[0];
    d.heads = in[1];
    d.seq = in[2];
    d.head_size = in[3];
    if (num_heads != 0 && dim_is_known(d.heads) && num_heads != d.heads)
      return ctx.error("num_heads {} does not match input dim 1 ({}) of a 4-D input", num_heads, d.heads);
  } else if (in.size() == 3) {
    if (num_heads <= 0) return ctx.error("a 3-D input [batch, seq, hidden] needs a positive num_heads attribute");
    d.batch = in[0];
    d.seq = in[1];
    d.heads = num_heads;
    if (dim_is_known(in[2])) {
      if (in[2] % num_heads != 0) return ctx.error("hidden size {} is not divisible by num_heads {}", in[2], num_heads);
      d.head_size = in[2] / num_heads;
    }
  } else {
    return ctx.error("input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size]; got {}",
                     shape_to_string(in));
  }
  const int64_t rot = ctx.node.attr_i("rotary_embedding_dim", 0);
  if (rot < 0 || rot % 2 != 0) return ctx.error("rotary_embedding_dim {} must be even and not negative", rot);
  if (rot == 0) {
    d.rot = d.head_size;
    if (dim_is_known(d.head_size) && d.head_size % 2 != 0)
      return ctx.error("head size {} is odd; full rotation needs an even head size", d.head_size);
  } else {
    d.rot = rot;
    if (dim_is_known(d.head_size) && rot > d.head_size)
      return ctx.error("rotary_embedding_dim {} exceeds the head size {}", rot, d.head_size);
  }
  return d;
}

}  // namespace

Status infer_RotaryEmbedding(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "input"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 1));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  const bool has_pos = ctx.has_input(3);
  if (has_pos && ctx.in(3).dtype != DType::Undefined && ctx.in(3).dtype != DType::I64)
    return ctx.error("position_ids has dtype {}; expected i64", dtype_name(ctx.in(3).dtype));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known) {
    GPUOPT_ASSIGN_OR_RETURN(RotaryDims d, rotary_dims(ctx, x.shape));
    for (size_t i = 1; i <= 2; ++i) {
      const ValueInfo& c = ctx.in(i);
      if (!c.rank_known) continue;
      const char* what = i == 1 ? "cos_cache" : "sin_cache";
      const size_t want_rank = has_pos ? 2 : 3;
      if (c.shape.size() != want_rank)
        return ctx.error("{} {} must be {} ({})", what, shape_to_string(c.shape), has_pos ? "2-D" : "3-D",
                         has_pos ? "[max_position, rotary_dim/2] with position_ids"
                                 : "[batch, seq, rotary_dim/2] without position_ids");
      if (dim_is_known(d.rot) && dim_is_known(c.shape.back()) && c.shape.back() * 2 != d.rot)
        return ctx.error("{} last dim {} is not rotary_dim/2 = {}", what, c.shape.back(), d.rot / 2);
      if (!has_pos)
        for (size_t k = 0; k < 2; ++k) {
          const int64_t want = k == 0 ? d.batch : d.seq;
          if (dim_is_known(want) && dim_is_known(c.shape[k]) && c.shape[k] != want)
            return ctx.error("{} {} does not match input [batch {}, seq {}]", what, shape_to_string(c.shape), d.batch,
                             d.seq);
        }
    }
    if (has_pos && ctx.in(3).rank_known) {
      const Shape& p = ctx.in(3).shape;
      if (p.size() != 2 || (dim_is_known(p[0]) && dim_is_known(d.batch) && p[0] != d.batch) ||
          (dim_is_known(p[1]) && dim_is_known(d.seq) && p[1] != d.seq))
        return ctx.error("position_ids {} must be [batch {}, seq {}]", shape_to_string(p), d.batch, d.seq);
    }
  }
  ctx.outputs[0].dtype = x.dtype;
  ctx.outputs[0].rank_known = x.rank_known;
  ctx.outputs[0].shape = x.shape;
  return Status::Ok();
}

Status cpu_RotaryEmbedding(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(RotaryDims d, rotary_dims(ctx, x.shape()));
  const bool interleaved = ctx.node.attr_i("interleaved", 0) != 0;
  const bool four_d = x.rank() == 4;
  const int64_t B = d.batch, S = d.seq, H = d.heads, D = d.head_size, half = d.rot / 2;
  const std::vector<double> xv = nn::to_doubles(x), cv = nn::to_doubles(ctx.in(1)), sv = nn::to_doubles(ctx.in(2));
  std::vector<int64_t> pos;
  const int64_t max_pos = ctx.in(1).dim(0);
  if (ctx.has_input(3)) pos = ctx.in(3).to_i64_vector();
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      int64_t row = b * S + s;  // [B, S, R/2] cache
      if (!pos.empty()) {
        row = pos[static_cast<size_t>(b * S + s)];
        if (row < 0 || row >= max_pos)
          return ctx.error("position_ids[{}, {}] = {} is outside the cache's {} positions", b, s, row, max_pos);
      }
      const double* c = cv.data() + row * half;
      const double* sn = sv.data() + row * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = four_d ? ((b * H + h) * S + s) * D : (b * S + s) * H * D + h * D;
        const double* in = xv.data() + base;
        double* out = y.data() + base;
        for (int64_t k = 0; k < half; ++k) {
          const int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
          out[i1] = c[k] * in[i1] - sn[k] * in[i2];
          out[i2] = sn[k] * in[i1] + c[k] * in[i2];
        }
        for (int64_t k = 2 * half; k < D; ++k) out[k] = in[k];
      }
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

// Four multiplies and two adds per rotated pair: 3 per rotated element.
double flops_RotaryEmbedding(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 3 * n;
}

}  // namespace gpuopt
