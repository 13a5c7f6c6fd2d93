// What Conv (cuDNN forward) and ConvTranspose (cuDNN backward data) share: the shape key their
// plans are cached under, the descriptors, picking an algorithm from cuDNN's ranked list, and
// the plan cache (failures are cached too, so a shape cuDNN cannot do fails fast every time).
#pragma once

#include "core/cuda_check.h"
#include "core/dtype.h"
#include "core/status.h"
#include "ir/conv2d_attrs.h"
#include "ir/graph.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/plan_store.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace gpuopt::cuda {

// x: [n, c, h, w]; y: [n, m, oh, ow]; kernel kh x kw; symmetric pads, strides, dilations, groups.
// nhwc: x, y and the filter are channels-last ([n, h, w, c], [m, kh, kw, c/group]); the sizes
// above name the same dims in either layout.
struct ConvKey {
  int64_t n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw;
  DType dt;
  bool nhwc = false;
  auto tie() const { return std::tie(n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw, dt, nhwc); }
  bool operator<(const ConvKey& o) const { return tie() < o.tie(); }
};

// The key of a forward convolution x (*) w -> y from a Conv/FusedConv/NhwcFusedConv node's
// attributes and shapes: x, w, y are [n, c, h, w], [m, c/g, kh, kw], [n, m, oh, ow], or
// [n, h, w, c], [m, kh, kw, c/g], [n, oh, ow, m] when nhwc.
inline ConvKey forward_conv_key(const Node& node, const Shape& x, const Shape& w, const Shape& y, DType dt, bool nhwc) {
  const auto pads = node.attr_ints("pads", {0, 0, 0, 0});
  const auto strides = node.attr_ints("strides", {1, 1});
  const auto dil = node.attr_ints("dilations", {1, 1});
  const int c = nhwc ? 3 : 1, h = nhwc ? 1 : 2;  // channel axis, first spatial axis
  return ConvKey{x[0],  x[c],       x[h],       x[h + 1],   w[0],   w[h],   w[h + 1], y[h], y[h + 1],
                 node.attr_i("group", 1), pads[0], pads[1], strides[0], strides[1], dil[0], dil[1], dt, nhwc};
}

inline cudnnDataType_t dnn_type(DType dt) {
  return dt == DType::F16 ? CUDNN_DATA_HALF : dt == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;  // bias: [1, m, 1, 1]
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescs() = default;
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
  ~ConvDescs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }

  // The filter is [filter_k, filter_c, kh, kw] (Conv: [m, c/group]; ConvTranspose: [c, m/group]),
  // or [filter_k, kh, kw, filter_c] when k.nhwc (cuDNN's KRSC); bias [1, m, 1, 1] is the same
  // bytes in either format.
  // Accumulation is f32 for every storage type. f32 gets FMA math: cuDNN's default lets Ampere+
  // use TF32 (seen on the H200: rel L2 3e-4 on ResNet-50 against the CPU reference, over the 1e-4
  // f32 bound); reduced precision may use tensor cores.
  Status build(const ConvKey& k, int64_t filter_k, int64_t filter_c) {
    const cudnnDataType_t t = dnn_type(k.dt);
    const cudnnTensorFormat_t f = k.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&x));
    GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(x, f, t, i(k.n), i(k.c), i(k.h), i(k.w)));
    GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&y));
    GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(y, f, t, i(k.n), i(k.m), i(k.oh), i(k.ow)));
    GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&bias));
    GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(bias, f, t, 1, i(k.m), 1, 1));
    GPUOPT_CHECK_CALL(cudnnCreateFilterDescriptor(&w));
    GPUOPT_CHECK_CALL(cudnnSetFilter4dDescriptor(w, t, f, i(filter_k), i(filter_c), i(k.kh), i(k.kw)));
    GPUOPT_CHECK_CALL(cudnnCreateConvolutionDescriptor(&conv));
    GPUOPT_CHECK_CALL(cudnnSetConvolution2dDescriptor(conv, i(k.ph), i(k.pw), i(k.sh), i(k.sw), i(k.dh), i(k.dw),
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    GPUOPT_CHECK_CALL(cudnnSetConvolutionGroupCount(conv, i(k.group)));
    GPUOPT_CHECK_CALL(cudnnSetConvolutionMathType(conv, k.dt == DType::F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    return Status::Ok();
  }
};

// The first of cuDNN's ranked algorithms (Perf: cudnnConvolutionFwdAlgoPerf_t, ...BwdDataAlgoPerf_t)
// that succeeded and fits in max_ws; f32 models must not be silently computed with TF32/half
// tensor cores. For reduced precision the conv takes the chosen algorithm's math type.
template <typename Perf>
Status choose_algo(const Perf* perf, int found, DType dt, size_t max_ws, cudnnConvolutionDescriptor_t conv,
                   decltype(Perf::algo)* algo, size_t* workspace, std::string_view what) {
  for (int a = 0; a < found; ++a) {
    if (perf[a].status != CUDNN_STATUS_SUCCESS || perf[a].memory > max_ws) continue;
    if (dt == DType::F32 && perf[a].mathType != CUDNN_FMA_MATH && perf[a].mathType != CUDNN_DEFAULT_MATH) continue;
    *algo = perf[a].algo;
    *workspace = perf[a].memory;
    if (dt != DType::F32) GPUOPT_CHECK_CALL(cudnnSetConvolutionMathType(conv, perf[a].mathType));
    return Status::Ok();
  }
  return Status::Unimplemented("cuDNN has no {} algorithm for this {} convolution within {} bytes of workspace", what,
                               dtype_name(dt), max_ws);
}

// A forward algorithm as the plan cache keeps it: "algo=<cudnnConvolutionFwdAlgo_t> math=<cudnnMathType_t>".
inline std::string algo_text(cudnnConvolutionFwdAlgo_t algo, cudnnConvolutionDescriptor_t conv) {
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  cudnnGetConvolutionMathType(conv, &math);
  return fmt::format("algo={} math={}", static_cast<int>(algo), static_cast<int>(math));
}

// Takes a cached forward algorithm (`value`, from algo_text) if cuDNN still accepts it for these
// descriptors within max_ws: sets the math type and fills algo and workspace. False (nothing
// changed but possibly the math type, which the caller's choice sets again) when there is none,
// it does not parse, or it no longer fits; the caller then chooses as on a cold start.
inline bool reuse_algo(const std::optional<std::string>& value, DType dt, size_t max_ws, cudnnHandle_t h,
                       const ConvDescs& d, cudnnConvolutionFwdAlgo_t* algo, size_t* workspace) {
  if (!value) return false;
  const auto a = plan_field(*value, "algo"), m = plan_field(*value, "math");
  if (!a || !m || *a < 0 || *a >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || *m < 0 || *m > 3) return false;
  if (dt == DType::F32 && *m != CUDNN_FMA_MATH && *m != CUDNN_DEFAULT_MATH) return false;  // as choose_algo
  const auto want = static_cast<cudnnConvolutionFwdAlgo_t>(*a);
  if (dt != DType::F32 && cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(*m)) != CUDNN_STATUS_SUCCESS)
    return false;
  size_t ws = 0;
  if (cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, want, &ws) != CUDNN_STATUS_SUCCESS || ws > max_ws)
    return false;
  *algo = want;
  *workspace = ws;
  return true;
}

// The most workspace a convolution's algorithm may ask for: kMaxCallWorkspace, or a quarter of
// --memory-limit when one is set. The context's 64 MB used to be the cap, and at batch 256 it
// excluded cuDNN's tensor-core algorithms for ResNet-50's large activations.
inline size_t conv_workspace_cap(const ExecContext& ctx) {
  const size_t limit = ctx.memory ? ctx.memory->limit() : 0;
  return limit ? std::min(kMaxCallWorkspace, std::max(ctx.workspace_bytes, limit / 4)) : kMaxCallWorkspace;
}

// Plans (descriptors + chosen algorithm + the status of building them) per device and shape,
// shared by every execution context of the process on that device. The device is the calling
// thread's current one: the executor makes its device current before any kernel runs.
template <class Plan>
class ConvPlanCache {
 public:
  template <class Build>
  const Plan* get(const ConvKey& key, Build&& build) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = plans_[{device, key}];
    if (!slot) {
      slot = std::make_unique<Plan>();
      slot->status = build(slot.get());
    }
    return slot.get();
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, ConvKey>, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpuopt::cuda
