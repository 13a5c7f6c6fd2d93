// cuDNN's fused flash attention (SDPA through the cuDNN frontend's graph API) for the Attention
// op: f16/bf16, head sizes multiples of 8 up to 128, no mask, a causal mask (top-left, as
// ONNX's is_causal) and/or an additive float mask (broadcast in batch and heads; a mask that
// broadcasts over the query rows is expanded to [.., q_seq, kv_seq] first, which cuDNN's bias
// wants; one already in that layout is read in place). Grouped-query heads are cuDNN's too. One graph per shape and strides, built on the
// shape's first (eager) run and cached, failures too; where cuDNN declines a shape, or for bool
// masks, the caller runs gpuopt's own kernels (attention.h). Q, K and V come with their strides:
// separate tensors, the 3-D [B, S, H*D] form or the packed QKV row (qkv_packed).
#include "ops/transformer/cuda/sdpa.h"

#include "ops/tensor/cuda/layout.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"

// The frontend loads cuDNN's graph API and NVRTC (for engines gpuopt does not use) with dlopen,
// so the binary takes no link-time dependency on NVRTC. Only this file includes the frontend.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>

// The frontend's handle for cuDNN's symbols: the libcudnn gpuopt is linked against, found by the
// default search (RTLD_DEFAULT), so frontend and legacy calls use one library.
namespace cudnn_frontend {
void* cudnn_dlhandle = RTLD_DEFAULT;
}  // namespace cudnn_frontend

namespace gpuopt::cuda {
namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kBias };

struct Key {
  std::vector<int64_t> v;
  bool operator<(const Key& o) const { return v < o.v; }
};

struct Plan {
  Status status;
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;  // enough for every built plan (the autotune tries each)
  // With GPUOPT_SDPA_AUTOTUNE=1 (KernelSettings::sdpa_autotune, part of the plan's key) every plan
  // cuDNN's heuristics offer is built; the shape's first eager call times them (the frontend's
  // autotune) and keeps the fastest. `mu` serializes that with the executes.
  std::mutex mu;
  std::atomic<bool> pending{false};
};

// GPUOPT_SDPA_AUTOTUNE=1 times every plan; off by default: on the H200 (BERT-base, cuDNN 9) it
// kept the heuristics' first plan at b256 and made b1 slower (docs/perf-notes.md).

std::mutex g_mu;
std::map<Key, std::unique_ptr<Plan>> g_plans;

// The bias cuDNN reads: [bb, bh, q_seq, kv_seq], contiguous, bb/bh 1 where the mask broadcasts.
struct BiasShape {
  int64_t b = 1, h = 1;
  bool expand = false;  // the mask broadcasts over query rows: materialised first
};

// GPUOPT_SDPA_BIAS=broadcast hands cuDNN a mask that broadcasts over the query rows ([B,1,1,S],
// BERT's padding mask) in place, with a zero row stride, instead of materialising
// [B, 1, q_seq, kv_seq] before every call (50 us per BERT-base b32 run); `expand` (the default
// until the H200 has checked cuDNN's reading of a zero stride) always materialises.
BiasShape bias_shape(const AttentionArgs& a, KernelSettings::SdpaBias mode) {
  BiasShape s;
  s.b = a.mask_sb == 0 ? 1 : a.batch;
  s.h = a.mask_sh == 0 ? 1 : a.q_heads;
  s.expand = !(mode == KernelSettings::SdpaBias::kBroadcast && a.mask_sq == 0 && a.mask_sk == 1);
  return s;
}

std::vector<int64_t> strides4(const HeadStrides& s) {
  return {s.b, s.h, s.s, 1};
}

Status build(Plan* p, const AttentionArgs& a, const BiasShape& bs, bool tune, cudnnHandle_t h) {
  auto g = std::make_shared<fe::graph::Graph>();
  const fe::DataType_t io = a.dt == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
  };
  auto q = tensor("Q", kQ, {a.batch, a.q_heads, a.q_seq, a.head}, strides4(a.qs));
  auto k = tensor("K", kK, {a.batch, a.kv_heads, a.kv_seq, a.head}, strides4(a.ks));
  auto v = tensor("V", kV, {a.batch, a.kv_heads, a.kv_seq, a.v_head}, strides4(a.vs));
  auto opts = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(false).set_attn_scale(a.scale);
  if (a.causal) opts.set_causal_mask(true);
  if (a.mask) {
    const int64_t sq = a.q_seq * a.kv_seq;
    opts.set_bias(bs.expand ? tensor("Bias", kBias, {bs.b, bs.h, a.q_seq, a.kv_seq}, {bs.h * sq, sq, a.kv_seq, 1})
                            : tensor("Bias", kBias, {bs.b, bs.h, a.q_seq, a.kv_seq}, {a.mask_sb, a.mask_sh, 0, 1}));
  }
  auto [o, stats] = g->sdpa(q, k, v, opts);
  (void)stats;
  o->set_output(true).set_uid(kO).set_dim({a.batch, a.q_heads, a.q_seq, a.v_head}).set_stride(strides4(a.ys));
  fe::error_t st =
      g->build(h, {fe::HeurMode_t::A}, tune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (!st.is_good()) return Status::Unimplemented("cuDNN SDPA: {}", st.get_message());
  if (tune) {
    p->workspace = g->get_autotune_workspace_size();
  } else {
    fe::error_t ws = g->get_workspace_size(p->workspace);
    if (!ws.is_good()) return Status::Unimplemented("cuDNN SDPA workspace: {}", ws.get_message());
  }
  p->pending.store(tune && g->get_execution_plan_count() > 1);
  p->graph = std::move(g);
  return Status::Ok();
}

Plan* find_plan(const AttentionArgs& a, const BiasShape& bs, bool tune, cudnnHandle_t h) {
  Key key{{static_cast<int64_t>(a.dt), a.batch, a.q_heads, a.kv_heads, a.q_seq, a.kv_seq, a.head, a.v_head, a.qs.b,
           a.qs.h, a.qs.s, a.ks.b, a.ks.h, a.ks.s, a.vs.b, a.vs.h, a.vs.s, a.ys.b, a.ys.h, a.ys.s, a.causal,
           a.mask != nullptr, bs.b, bs.h, static_cast<int64_t>(a.scale * 1e6f), bs.expand ? -1 : a.mask_sb,
           bs.expand ? -1 : a.mask_sh, tune}};
  std::lock_guard<std::mutex> lock(g_mu);
  auto& slot = g_plans[key];
  if (!slot) {
    slot = std::make_unique<Plan>();
    slot->status = build(slot.get(), a, bs, tune, h);
    if (!slot->status.ok()) GPUOPT_LOG(info, "attention: {}; running gpuopt's kernel", slot->status.to_string());
  }
  return slot.get();
}

// Times every built plan on this call's buffers (each writes Y, which the real call then
// overwrites) and keeps the fastest; never inside a stream capture (the heuristics' first plan
// runs meanwhile and a later eager call tunes). The frontend synchronizes the device around it.
void tune_plan(Plan* p, cudnnHandle_t h, std::unordered_map<int64_t, void*>& pack, void* ws, cudaStream_t s) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;
  }
  p->pending.store(false);
  const int64_t n = p->graph->get_execution_plan_count();
  fe::error_t st = p->graph->autotune(h, pack, ws);
  std::string name;
  if (st.is_good() && !p->graph->get_plan_name(name).is_good()) name = "?";
  GPUOPT_LOG(debug, "attention: cuDNN SDPA autotune over {} plans: {}", n,
             st.is_good() ? "kept " + name : "failed (" + st.get_message() + "), first plan kept");
}

// A mask already laid out as the expanded bias (contiguous [bb, bh, q_seq, kv_seq]: GPT-2's causal
// bias, a [B, 1, S, S] mask) is handed to cuDNN in place: the copy would write the same bytes in
// the same layout, so the plan (built for the expanded bias) reads the same values.
// GPUOPT_SDPA_BIAS=copy copies it anyway (the behaviour before, for A/B runs).
bool bias_in_place(const AttentionArgs& a, const BiasShape& bs, bool copy) {
  const int64_t sq = a.q_seq * a.kv_seq;
  return !copy && bs.expand && (reinterpret_cast<uintptr_t>(a.mask) & 15) == 0 && a.mask_sk == 1 && a.mask_sq == a.kv_seq && (a.mask_sh == 0 ? bs.h == 1 : a.mask_sh == sq) &&
         (a.mask_sb == 0 ? bs.b == 1 : a.mask_sb == bs.h * sq);
}

size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

}  // namespace

bool sdpa_applies(const AttentionArgs& a) {
  const AttentionKernel mode = a.kernel;
  if (mode != AttentionKernel::kAuto && mode != AttentionKernel::kCudnn) return false;
  if (a.dt != DType::F16 && a.dt != DType::BF16) return false;
  if (a.head % 8 != 0 || a.v_head % 8 != 0 || a.head > 128 || a.v_head > 128) return false;
  if (a.q_heads % a.kv_heads != 0) return false;
  // Bool masks, and masks shorter than the keys (keys past them masked), stay with our kernels.
  if (a.mask && (a.mask_bool || a.mask_len != a.kv_seq)) return false;
  return a.batch > 0 && a.q_seq > 0 && a.kv_seq > 0;
}

Result<bool> run_sdpa(const AttentionArgs& a, ExecContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, ctx.cudnn());
  const KernelSettings& ks = ctx.kernels();
  const BiasShape bs = bias_shape(a, ks.sdpa_bias);
  Plan* plan = find_plan(a, bs, ks.sdpa_autotune, h);
  if (!plan->status.ok()) return false;
  const size_t es = dtype_size(a.dt);
  const bool copy_bias = a.mask && bs.expand && !bias_in_place(a, bs, ks.sdpa_bias == KernelSettings::SdpaBias::kCopy);
  const size_t bias_bytes = copy_bias ? align256(static_cast<size_t>(bs.b * bs.h * a.q_seq * a.kv_seq) * es) : 0;
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* buf, call_workspace(ctx, bias_bytes + static_cast<size_t>(plan->workspace), &hold));
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(a.q)},
                                           {kK, const_cast<void*>(a.k)},
                                           {kV, const_cast<void*>(a.v)},
                                           {kO, a.y}};
  if (a.mask && !copy_bias) pack[kBias] = const_cast<void*>(a.mask);
  if (copy_bias) {
    // [bb, bh, q_seq, kv_seq] from the mask's broadcast strides.
    StridedDesc d;
    d.rank = 4;
    d.out_dims[0] = bs.b;
    d.out_dims[1] = bs.h;
    d.out_dims[2] = a.q_seq;
    d.out_dims[3] = a.kv_seq;
    d.in_strides[0] = a.mask_sb;
    d.in_strides[1] = a.mask_sh;
    d.in_strides[2] = a.mask_sq;
    d.in_strides[3] = a.mask_sk;
    d.numel = bs.b * bs.h * a.q_seq * a.kv_seq;
    GPUOPT_RETURN_IF_ERROR(launch_strided_copy(es, a.mask, buf, d, ctx.stream));
    pack[kBias] = buf;
  }
  GPUOPT_CHECK_CALL(cudnnSetStream(h, ctx.stream));
  void* ws = static_cast<char*>(buf) + bias_bytes;
  std::lock_guard<std::mutex> lock(plan->mu);
  if (plan->pending.load()) tune_plan(plan, h, pack, ws, ctx.stream);
  fe::error_t st = plan->graph->execute(h, pack, ws);
  if (!st.is_good()) return Status::Internal("cuDNN SDPA execute: {}", st.get_message());
  return true;
}

}  // namespace gpuopt::cuda
