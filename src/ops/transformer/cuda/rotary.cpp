// RotaryEmbedding (ONNX opset 23) on the GPU: 3-D [B, S, H*D] (num_heads) or 4-D [B, H, S, D]
// input, interleaved or halves, a partial rotary_embedding_dim, cos/sin caches indexed by
// position_ids [B, S] or given per token [B, S, rot/2] (no position_ids); f32/f16/bf16.
#include "ops/transformer/cuda/rotary.h"
#include "backends/cuda/cuda_ops.h"

namespace gpuopt::cuda {
namespace {

Status run_rotary(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  RotaryArgs a;
  a.dt = x.dtype();
  a.x = x.raw();
  a.cos = k.in(1).raw();
  a.sin = k.in(2).raw();
  a.y = k.out(0).raw();
  a.interleaved = k.node.attr_i("interleaved", 0) != 0;
  a.four_d = x.rank() == 4;
  if (a.four_d) {
    a.batch = x.dim(0), a.heads = x.dim(1), a.seq = x.dim(2), a.head = x.dim(3);
  } else if (x.rank() == 3) {
    a.heads = k.node.attr_i("num_heads", 0);
    if (a.heads <= 0 || x.dim(2) % a.heads != 0)
      return k.error("3-D input {} does not split into num_heads {}", shape_to_string(x.shape()), a.heads);
    a.batch = x.dim(0), a.seq = x.dim(1), a.head = x.dim(2) / a.heads;
  } else {
    return k.error("input must be 3-D or 4-D, got {}", shape_to_string(x.shape()));
  }
  a.rot = k.node.attr_i("rotary_embedding_dim", 0);
  if (a.rot == 0) a.rot = a.head;
  if (a.rot % 2 != 0 || a.rot > a.head) return k.error("rotary_embedding_dim {} for head size {}", a.rot, a.head);
  const Tensor& c = k.in(1);
  const bool has_pos = k.inputs.size() > 3 && k.inputs[3];
  if (c.dim(-1) * 2 != a.rot) return k.error("cos_cache {} is not [.., rot/2 = {}]", shape_to_string(c.shape()), a.rot / 2);
  if (has_pos) {
    if (c.rank() != 2 || k.in(3).numel() != a.batch * a.seq)
      return k.error("position_ids {} / cos_cache {} do not fit [B {}, S {}]", shape_to_string(k.in(3).shape()),
                     shape_to_string(c.shape()), a.batch, a.seq);
    a.pos = static_cast<const int64_t*>(k.in(3).raw());
    a.max_pos = c.dim(0);
  } else if (c.numel() != a.batch * a.seq * (a.rot / 2)) {
    return k.error("cos_cache {} is not [B {}, S {}, rot/2]", shape_to_string(c.shape()), a.batch, a.seq);
  }
  return launch_rotary(a, k.ctx.stream).with_context(node_label(k.node));
}

bool rotary_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() < 3 || (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16)) return false;
  if (in[1] != in[0] || in[2] != in[0]) return false;
  return in.size() < 4 || in[3] == DType::Undefined || in[3] == DType::I64;
}

}  // namespace

GPUOPT_CUDA_OP(RotaryEmbedding, &run_rotary, &rotary_supported);

}  // namespace gpuopt::cuda
