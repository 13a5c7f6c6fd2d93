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
#include <array>
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
// above name the same dims in either layout. A 1-D convolution is the 2-D one of unit height
// (h = kh = oh = 1). A 3-D one (NCDHW only) has d > 0: its depth extents d/kd/od, pad, stride
// and dilation; d = 0 for every 1-D and 2-D key.
struct ConvKey {
  int64_t n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw;
  DType dt;
  bool nhwc = false;
  int64_t d = 0, kd = 1, od = 1, pd = 0, sd = 1, dd = 1;
  auto tie() const {
    return std::tie(n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw, dt, nhwc, d, kd, od, pd, sd, dd);
  }
  bool operator<(const ConvKey& o) const { return tie() < o.tie(); }
};

// The key of a convolution from its node's attributes (pads, strides, dilations, group) and its
// shapes: x [n, c, spatial...], w [*, *, kernel...], y [n, m, spatial...] with 1, 2 or 3 spatial
// axes (NCHW), or [n, h, w, c], [m, kh, kw, c/g], [n, oh, ow, m] when nhwc (2-D only). `m` is
// y's channel count (w[0] for a forward convolution).
inline ConvKey conv_key_of(const Node& node, const Shape& x, const Shape& w, const Shape& y, int64_t m, DType dt,
                           bool nhwc) {
  const size_t nd = x.size() - 2;  // spatial rank
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const auto dil = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  const size_t c = nhwc ? 3 : 1, s0 = nhwc ? 1 : 2;  // channel axis, first spatial axis
  // Spatial axis i (0 = depth, 1 = height, 2 = width) of a rank-nd shape, `none` where it has no such axis.
  auto at = [&](const auto& v, size_t base, size_t i, int64_t none) {
    const size_t off = 3 - nd;  // 1-D: width only; 2-D: height, width; 3-D: all three
    return i < off ? none : v[base + i - off];
  };
  auto attr = [&](const std::vector<int64_t>& v, size_t i, int64_t none) {
    return v.size() >= nd ? at(v, 0, i, none) : none;
  };
  ConvKey k{x[0],
            x[c],
            at(x, s0, 1, 1),
            at(x, s0, 2, 1),
            m,
            at(w, s0, 1, 1),
            at(w, s0, 2, 1),
            at(y, s0, 1, 1),
            at(y, s0, 2, 1),
            node.attr_i("group", 1),
            attr(pads, 1, 0),
            attr(pads, 2, 0),
            attr(strides, 1, 1),
            attr(strides, 2, 1),
            attr(dil, 1, 1),
            attr(dil, 2, 1),
            dt,
            nhwc};
  if (nd == 3) {
    k.d = x[s0];
    k.kd = w[s0];
    k.od = y[s0];
    k.pd = attr(pads, 0, 0);
    k.sd = attr(strides, 0, 1);
    k.dd = attr(dil, 0, 1);
  }
  return k;
}

// The key of a forward convolution x (*) w -> y from a Conv/FusedConv/NhwcFusedConv node: x, w,
// y are [n, c, spatial...], [m, c/g, kernel...], [n, m, spatial...], or [n, h, w, c],
// [m, kh, kw, c/g], [n, oh, ow, m] when nhwc.
inline ConvKey forward_conv_key(const Node& node, const Shape& x, const Shape& w, const Shape& y, DType dt, bool nhwc) {
  return conv_key_of(node, x, w, y, w[0], dt, nhwc);
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
  // bytes in either format. A 3-D key (k.d > 0) gets the 5-D (NCDHW) forms of each.
  // Accumulation is f32 for every storage type. f32 gets FMA math: cuDNN's default lets Ampere+
  // use TF32 (seen on the H200: rel L2 3e-4 on ResNet-50 against the CPU reference, over the 1e-4
  // f32 bound); reduced precision may use tensor cores.
  Status build(const ConvKey& k, int64_t filter_k, int64_t filter_c) {
    if (k.d > 0) return build_3d(k, filter_k, filter_c);
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
    return finish(k);
  }

 private:
  // NCDHW tensors, a [filter_k, filter_c, kd, kh, kw] filter and a 3-D convolution descriptor;
  // bias [1, m, 1, 1, 1].
  Status build_3d(const ConvKey& k, int64_t filter_k, int64_t filter_c) {
    const cudnnDataType_t t = dnn_type(k.dt);
    auto i = [](int64_t v) { return static_cast<int>(v); };
    auto tensor = [&](cudnnTensorDescriptor_t* desc, std::array<int, 5> dims) -> Status {
      GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(desc));
      GPUOPT_CHECK_CALL(cudnnSetTensorNdDescriptorEx(*desc, CUDNN_TENSOR_NCHW, t, 5, dims.data()));
      return Status::Ok();
    };
    GPUOPT_RETURN_IF_ERROR(tensor(&x, {i(k.n), i(k.c), i(k.d), i(k.h), i(k.w)}));
    GPUOPT_RETURN_IF_ERROR(tensor(&y, {i(k.n), i(k.m), i(k.od), i(k.oh), i(k.ow)}));
    GPUOPT_RETURN_IF_ERROR(tensor(&bias, {1, i(k.m), 1, 1, 1}));
    const std::array<int, 5> fdims{i(filter_k), i(filter_c), i(k.kd), i(k.kh), i(k.kw)};
    GPUOPT_CHECK_CALL(cudnnCreateFilterDescriptor(&w));
    GPUOPT_CHECK_CALL(cudnnSetFilterNdDescriptor(w, t, CUDNN_TENSOR_NCHW, 5, fdims.data()));
    const std::array<int, 3> pad{i(k.pd), i(k.ph), i(k.pw)}, stride{i(k.sd), i(k.sh), i(k.sw)},
        dil{i(k.dd), i(k.dh), i(k.dw)};
    GPUOPT_CHECK_CALL(cudnnCreateConvolutionDescriptor(&conv));
    GPUOPT_CHECK_CALL(cudnnSetConvolutionNdDescriptor(conv, 3, pad.data(), stride.data(), dil.data(),
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    return finish(k);
  }

  Status finish(const ConvKey& k) {
    GPUOPT_CHECK_CALL(cudnnSetConvolutionGroupCount(conv, static_cast<int>(k.group)));
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
