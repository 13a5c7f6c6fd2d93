// 2-D ConvTranspose through cuDNN: the transposed convolution is the backward-data pass of the
// forward convolution that maps the output's shape to the input's (ConvTranspose's weight
// [C, M/group, kh, kw] is that convolution's filter). NCHW, symmetric pads, output_padding,
// groups, dilations; plans cached per shape, failures too. auto_pad other than NOTSET/VALID, an
// explicit output_shape and asymmetric pads run on the CPU.
#include "backends/cuda/cuda_ops.h"
#include "core/cuda_check.h"

#include <cudnn.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace gpuopt::cuda {
namespace {

struct Key {
  int64_t n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw;
  DType dt;
  auto tie() const { return std::tie(n, c, h, w, m, kh, kw, oh, ow, group, ph, pw, sh, sw, dh, dw, dt); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Plan {
  Status status;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionBwdDataAlgo_t algo{};
  size_t workspace = 0;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

std::mutex g_mu;
std::map<Key, std::unique_ptr<Plan>> g_plans;

cudnnDataType_t dnn_type(DType dt) {
  return dt == DType::F16 ? CUDNN_DATA_HALF : dt == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// x: [n, c, h, w] (the forward convolution's output, "dy"); y: [n, m, oh, ow] ("dx").
Status build(Plan* p, const Key& k, cudnnHandle_t h, size_t max_ws) {
  const cudnnDataType_t t = dnn_type(k.dt);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&p->x));
  GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, i(k.n), i(k.c), i(k.h), i(k.w)));
  GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&p->y));
  GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, i(k.n), i(k.m), i(k.oh), i(k.ow)));
  GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&p->bias));
  GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, t, 1, i(k.m), 1, 1));
  GPUOPT_CHECK_CALL(cudnnCreateFilterDescriptor(&p->w));
  GPUOPT_CHECK_CALL(cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, i(k.c), i(k.m / k.group), i(k.kh), i(k.kw)));
  GPUOPT_CHECK_CALL(cudnnCreateConvolutionDescriptor(&p->conv));
  GPUOPT_CHECK_CALL(cudnnSetConvolution2dDescriptor(p->conv, i(k.ph), i(k.pw), i(k.sh), i(k.sw), i(k.dh), i(k.dw),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  GPUOPT_CHECK_CALL(cudnnSetConvolutionGroupCount(p->conv, i(k.group)));
  // As Conv: f32 gets FMA math (no TF32), reduced precision may use tensor cores.
  GPUOPT_CHECK_CALL(cudnnSetConvolutionMathType(p->conv, k.dt == DType::F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int found = 0;
  GPUOPT_CHECK_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->x, p->conv, p->y,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf));
  for (int a = 0; a < found; ++a) {
    if (perf[a].status != CUDNN_STATUS_SUCCESS || perf[a].memory > max_ws) continue;
    if (k.dt == DType::F32 && perf[a].mathType != CUDNN_FMA_MATH && perf[a].mathType != CUDNN_DEFAULT_MATH) continue;
    p->algo = perf[a].algo;
    p->workspace = perf[a].memory;
    if (k.dt != DType::F32) GPUOPT_CHECK_CALL(cudnnSetConvolutionMathType(p->conv, perf[a].mathType));
    return Status::Ok();
  }
  return Status::Unimplemented("cuDNN has no backward-data algorithm for this {} transposed convolution within {} bytes "
                               "of workspace", dtype_name(k.dt), max_ws);
}

Status run_conv_transpose(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Tensor& w = k.in(1);
  const Tensor& y = k.out(0);
  if (x.rank() != 4 || w.rank() != 4) return k.error("only 2-D (NCHW) transposed convolutions run on CUDA");
  const auto pads = k.node.attr_ints("pads", {0, 0, 0, 0});
  const auto strides = k.node.attr_ints("strides", {1, 1});
  const auto dil = k.node.attr_ints("dilations", {1, 1});
  const int64_t group = k.node.attr_i("group", 1);
  if (w.shape()[0] != x.shape()[1] || w.shape()[1] * group != y.shape()[1])
    return k.error("weight {} does not match input {} and output {}", shape_to_string(w.shape()),
                   shape_to_string(x.shape()), shape_to_string(y.shape()));
  Key key{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], y.shape()[1], w.shape()[2], w.shape()[3],
          y.shape()[2], y.shape()[3], group, pads[0], pads[1], strides[0], strides[1], dil[0], dil[1], x.dtype()};
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  Plan* plan;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& slot = g_plans[key];
    if (!slot) {
      slot = std::make_unique<Plan>();
      slot->status = build(slot.get(), key, h, k.ctx.workspace_bytes);
    }
    plan = slot.get();
  }
  GPUOPT_RETURN_IF_ERROR(plan->status.with_context(node_label(k.node)));
  const float one = 1.f, zero = 0.f;
  GPUOPT_CHECK_CALL(cudnnConvolutionBackwardData(h, &one, plan->w, w.raw(), plan->x, x.raw(), plan->conv, plan->algo,
                                                 k.ctx.workspace, plan->workspace, &zero, plan->y, k.out(0).raw()));
  if (k.inputs.size() > 2 && k.inputs[2])
    GPUOPT_CHECK_CALL(cudnnAddTensor(h, &one, plan->bias, k.in(2).raw(), &one, plan->y, k.out(0).raw()));
  return Status::Ok();
}

// The spatial rank comes from any attribute that has one value per spatial axis.
bool conv_transpose_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || in[0] != in[1] || (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0])) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if ((ap != "NOTSET" && ap != "VALID") || n.has_attr("output_shape")) return false;
  const auto ks = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"), dl = n.attr_ints("dilations");
  const auto pads = n.attr_ints("pads"), op = n.attr_ints("output_padding");
  if (!(ks.size() == 2 || st.size() == 2 || dl.size() == 2 || pads.size() == 4 || op.size() == 2)) return false;
  if (!ks.empty() && ks.size() != 2) return false;
  if ((!st.empty() && st.size() != 2) || (!dl.empty() && dl.size() != 2) || (!op.empty() && op.size() != 2)) return false;
  return pads.empty() || (pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3]);
}

}  // namespace

GPUOPT_CUDA_OP(ConvTranspose, &run_conv_transpose, &conv_transpose_supported);

}  // namespace gpuopt::cuda
