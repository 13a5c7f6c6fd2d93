// Attention (ONNX opset 23/24) on the GPU without a KV cache: 4-D Q [B, Hq, Sq, D], K [B, Hkv,
// Skv, D], V [B, Hkv, Skv, Dv] (Hq a multiple of Hkv), or the 3-D form [B, S, H*D] with
// q_num_heads/kv_num_heads (read and written in place through strides: no head-split
// transposes); an optional bool or additive mask broadcast to [B, Hq, Sq, Skv], is_causal and
// scale — what fuse_attention writes and what the exporters' SDPA becomes. Past/present KV,
// nonpad_kv_seqlen, softcap and the qk_matmul output run on the CPU reference. With qkv_packed=1
// (merge_qkv) input 0 is one [B, S, (Hq + 2 Hkv) * D] tensor, Q, K and V read from its three column
// ranges in place (strides of the packed row: no split copy).
#include "ops/transformer/cuda/sdpa.h"
#include "ops/transformer/cuda/attention.h"
#include "backends/cuda/cuda_ops.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"

#include <cmath>
#include <string>

namespace gpuopt::cuda {
namespace {

// Q, K and V as the three column ranges of the packed [B, S, (Hq + 2 Hkv) * D] input 0.
Status packed_args(CudaKernelContext& k, AttentionArgs* a) {
  const Tensor& x = k.in(0);
  a->q_heads = k.node.attr_i("q_num_heads", 0);
  a->kv_heads = k.node.attr_i("kv_num_heads", 0);
  const int64_t parts = a->q_heads + 2 * a->kv_heads;
  if (x.rank() != 3 || a->q_heads <= 0 || a->kv_heads <= 0 || x.dim(2) % parts != 0)
    return k.error("packed QKV {} does not split into {} + 2 x {} heads", shape_to_string(x.shape()), a->q_heads,
                   a->kv_heads);
  a->batch = x.dim(0);
  a->q_seq = a->kv_seq = x.dim(1);
  a->head = a->v_head = x.dim(2) / parts;
  const size_t es = dtype_size(x.dtype());
  const char* base = static_cast<const char*>(x.raw());
  a->q = base;
  a->k = base + static_cast<size_t>(a->q_heads * a->head) * es;
  a->v = base + static_cast<size_t>((a->q_heads + a->kv_heads) * a->head) * es;
  const HeadStrides row{x.dim(1) * x.dim(2), a->head, x.dim(2)};  // [B, S, parts, D] read per head
  a->qs = a->ks = a->vs = row;
  a->ys = HeadStrides::bshd(a->q_heads, a->q_seq, a->v_head);
  return Status::Ok();
}

// Q, K and V as separate 4-D or 3-D tensors (inputs 0, 1, 2).
Status unpacked_args(CudaKernelContext& k, AttentionArgs* out) {
  const Tensor& q = k.in(0);
  const Tensor& kk = k.in(1);
  const Tensor& v = k.in(2);
  const bool three_d = q.rank() == 3 && kk.rank() == 3 && v.rank() == 3;
  if (!three_d && (q.rank() != 4 || kk.rank() != 4 || v.rank() != 4))
    return k.error("Q, K, V must all be 3-D or all 4-D (got ranks {}, {}, {})", q.rank(), kk.rank(), v.rank());
  AttentionArgs& a = *out;
  a.q = q.raw();
  a.k = kk.raw();
  a.v = v.raw();
  a.batch = q.dim(0);
  if (three_d) {
    a.q_heads = k.node.attr_i("q_num_heads", 0);
    a.kv_heads = k.node.attr_i("kv_num_heads", 0);
    if (a.q_heads <= 0 || a.kv_heads <= 0 || q.dim(2) % a.q_heads || kk.dim(2) % a.kv_heads || v.dim(2) % a.kv_heads)
      return k.error("3-D Q {}, K {}, V {} do not split into {} / {} heads", shape_to_string(q.shape()),
                     shape_to_string(kk.shape()), shape_to_string(v.shape()), a.q_heads, a.kv_heads);
    a.q_seq = q.dim(1);
    a.kv_seq = kk.dim(1);
    a.head = q.dim(2) / a.q_heads;
    a.v_head = v.dim(2) / a.kv_heads;
    if (kk.dim(2) / a.kv_heads != a.head || v.dim(1) != a.kv_seq)
      return k.error("Q {}, K {}, V {} do not fit together", shape_to_string(q.shape()), shape_to_string(kk.shape()),
                     shape_to_string(v.shape()));
    a.qs = HeadStrides::bshd(a.q_heads, a.q_seq, a.head);
    a.ks = HeadStrides::bshd(a.kv_heads, a.kv_seq, a.head);
    a.vs = HeadStrides::bshd(a.kv_heads, a.kv_seq, a.v_head);
    a.ys = HeadStrides::bshd(a.q_heads, a.q_seq, a.v_head);
  } else {
    a.q_heads = q.dim(1);
    a.q_seq = q.dim(2);
    a.head = q.dim(3);
    a.kv_heads = kk.dim(1);
    a.kv_seq = kk.dim(2);
    a.v_head = v.dim(3);
    if (kk.dim(3) != a.head || v.dim(1) != a.kv_heads || v.dim(2) != a.kv_seq)
      return k.error("Q {}, K {}, V {} do not fit together", shape_to_string(q.shape()), shape_to_string(kk.shape()),
                     shape_to_string(v.shape()));
    a.qs = HeadStrides::bhsd(a.q_heads, a.q_seq, a.head);
    a.ks = HeadStrides::bhsd(a.kv_heads, a.kv_seq, a.head);
    a.vs = HeadStrides::bhsd(a.kv_heads, a.kv_seq, a.v_head);
    a.ys = HeadStrides::bhsd(a.q_heads, a.q_seq, a.v_head);
  }
  if (kk.dim(0) != a.batch || v.dim(0) != a.batch || a.kv_heads == 0 || a.q_heads % a.kv_heads != 0)
    return k.error("Q {}, K {}, V {} do not fit together", shape_to_string(q.shape()), shape_to_string(kk.shape()),
                   shape_to_string(v.shape()));
  return Status::Ok();
}

// Scale, causality, the mask and the NaN guard; then cuDNN's SDPA where it applies and our flash
// kernel is not preferred (attention.h), else ours.
Status run_args(CudaKernelContext& k, AttentionArgs& a) {
  if (a.kv_heads == 0 || a.q_heads % a.kv_heads != 0) return k.error("{} query heads over {} KV heads", a.q_heads, a.kv_heads);
  a.scale = k.node.has_attr("scale") ? k.node.attr_f("scale", 1.f) : 1.f / std::sqrt(static_cast<float>(a.head));
  a.causal = k.node.attr_i("is_causal", 0) != 0;
  if (k.inputs.size() > 3 && k.inputs[3]) {
    const Tensor& m = k.in(3);
    if (m.rank() > 4 || m.rank() < 1) return k.error("attn_mask of rank {} (1..4 broadcast to 4-D)", m.rank());
    const int64_t target[4] = {a.batch, a.q_heads, a.q_seq, a.kv_seq};
    int64_t dims[4] = {1, 1, 1, 1};
    for (int64_t i = 0; i < m.rank(); ++i) dims[4 - m.rank() + i] = m.dim(i);
    int64_t strides[4], s = 1;
    for (int i = 3; i >= 0; --i) {
      strides[i] = dims[i] == 1 ? 0 : s;
      s *= dims[i];
      if (i < 3 && dims[i] != 1 && dims[i] != target[i])
        return k.error("attn_mask {} does not broadcast to [{}, {}, {}, {}]", shape_to_string(m.shape()), target[0],
                       target[1], target[2], target[3]);
    }
    if (dims[3] > a.kv_seq) return k.error("attn_mask's last dim {} exceeds the {} keys", dims[3], a.kv_seq);
    a.mask = m.raw();
    a.mask_bool = m.dtype() == DType::Bool;
    a.mask_sb = strides[0];
    a.mask_sh = strides[1];
    a.mask_sq = strides[2];
    a.mask_sk = strides[3];
    a.mask_len = dims[3] == 1 ? a.kv_seq : dims[3];
  }
  a.nan_to_zero = k.node.attr_i("nan_to_zero", 0) != 0;
  if (sdpa_applies(a) && !attention_fa_preferred(a)) {
    Result<bool> ran = run_sdpa(a, k.ctx);
    if (!ran.ok()) return ran.status().with_context(node_label(k.node));
    if (!*ran) return launch_attention(a, k.ctx.stream).with_context(node_label(k.node));
    // nan_to_zero is left to cuDNN (no pass after it): on the H200 cuDNN 9 writes 0 for a row whose
    // every key is masked (backend-ops' fully masked Attention cases: 21/21);
    // GPUOPT_SDPA_NAN_GUARD=pass keeps the in-place pass after cuDNN (the behaviour before).
    if (!a.nan_to_zero || k.ctx.kernels().sdpa_nan_guard == KernelSettings::SdpaNanGuard::kCudnn) return Status::Ok();
    return launch_nan_to_zero(a.dt, a.y, k.out(0).numel(), k.ctx.stream).with_context(node_label(k.node));
  }
  return launch_attention(a, k.ctx.stream).with_context(node_label(k.node));
}

Status run_attention(CudaKernelContext& k) {
  AttentionArgs a;
  static_assert(static_cast<int>(AttentionKernel::kScalar) == static_cast<int>(KernelSettings::AttentionKernel::kScalar));
  a.kernel = static_cast<AttentionKernel>(k.ctx.kernels().attention_kernel);
  a.fa_warps = k.ctx.kernels().fa_warps;
  const Tensor& q = k.in(0);
  a.dt = q.dtype();
  a.y = k.out(0).raw();
  if (k.node.attr_i("qkv_packed", 0) != 0) {
    GPUOPT_RETURN_IF_ERROR(packed_args(k, &a));
  } else {
    GPUOPT_RETURN_IF_ERROR(unpacked_args(k, &a));
  }
  return run_args(k, a);
}

bool attention_supported(const Node& n, const std::vector<DType>& in) {
  if (in.empty() || (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16)) return false;
  if (n.attr_i("qkv_packed", 0) != 0) {  // K and V are column ranges of input 0
    if (in.size() > 1 && in[1] != DType::Undefined) return false;
    if (in.size() > 2 && in[2] != DType::Undefined) return false;
  } else if (in.size() < 3 || in[1] != in[0] || in[2] != in[0]) {
    return false;
  }
  if (in.size() > 3 && in[3] != DType::Undefined && in[3] != in[0] && in[3] != DType::Bool) return false;
  for (size_t i = 4; i < in.size(); ++i)
    if (in[i] != DType::Undefined) return false;  // past key/value, nonpad_kv_seqlen
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] != kNoValue) return false;  // present key/value, qk_matmul_output
  return n.attr_f("softcap", 0.f) == 0.f;
}

}  // namespace

GPUOPT_CUDA_OP(Attention, &run_attention, &attention_supported);

}  // namespace gpuopt::cuda
