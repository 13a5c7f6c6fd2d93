// The CUDA backend's op table: which ops have a CUDA kernel, which of their inputs the kernel
// reads on the host (shape-like inputs such as Reshape's shape), and the kernel itself. Each
// src/ops/<family>/cuda/*.cpp registers its ops with GPUOPT_CUDA_OP; an op with no entry runs on
// the CPU backend and the executor inserts the copies.
//
// Registration is by opset range, as for the CPU forms (ir/ops_versions.inc): GPUOPT_CUDA_OP
// covers every opset; where ONNX changed the op, GPUOPT_CUDA_OP_RANGE(Name, since, until, ...)
// registers one kernel per form, and the model's opset for the node's domain picks it
// (cuda_op). A kernel never reads the opset.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

typedef struct CUstream_st* cudaStream_t;
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cudnnContext* cudnnHandle_t;

namespace gpuopt {
struct KernelSettings;
}  // namespace gpuopt

namespace gpuopt::cuda {

class DeviceMemory;

// Per execution context (one per concurrent run): its stream and library handles, and the
// session's kernel choices (gpuopt/kernel_settings.h).
struct ExecContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;  // created on first use
  void* workspace = nullptr;    // for cuBLASLt / cuDNN
  size_t workspace_bytes = 0;
  DeviceMemory* memory = nullptr;
  const KernelSettings* settings = nullptr;  // the executable's; nullptr: the built-in defaults
  Result<cudnnHandle_t> cudnn();
  // *settings, or the built-in defaults (a context made outside an executable: kernel tests).
  const KernelSettings& kernels() const;
};

// Library workspaces larger than the context's own (cuDNN's fastest convolution at batch 256
// wants hundreds of MB) come from the stream-ordered pool for one call; `hold` keeps them until
// the kernel returns, and the free is ordered after the launch (inside a capture, a graph
// allocation). A convolution may ask for up to kMaxCallWorkspace.
constexpr size_t kMaxCallWorkspace = size_t{2} << 30;
Result<void*> call_workspace(ExecContext& ctx, size_t bytes, Tensor* hold);

struct CudaKernelContext {
  const Node& node;
  std::vector<const Tensor*> inputs;   // device tensors; nullptr for absent inputs and host-only inputs
  std::vector<const Tensor*> host;     // host values where known (constants, host-only inputs), else nullptr
  std::vector<Tensor*> outputs;        // allocated device tensors (for alias ops: empty Tensors to fill)
  ExecContext& ctx;

  bool has_input(size_t i) const { return i < inputs.size() && (inputs[i] != nullptr || host[i] != nullptr); }
  const Tensor& in(size_t i) const { return *inputs[i]; }
  Tensor& out(size_t i) const { return *outputs[i]; }
  template <typename... Args>
  Status error(fmt::format_string<Args...> f, Args&&... args) const {
    return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
  }
};

using CudaKernelFn = Status (*)(CudaKernelContext&);
// Whether the kernel handles this node with these input dtypes (Undefined = absent input).
using CudaSupportsFn = bool (*)(const Node&, const std::vector<DType>& input_dtypes);

struct CudaOpEntry {
  CudaKernelFn run = nullptr;
  CudaSupportsFn supports = nullptr;
  uint32_t host_inputs = 0;  // bit i: input i is read on the host
  bool alias = false;        // outputs view an input's memory (shape-only ops): no allocation
  int since = 1;             // the opsets (of the node's domain) this kernel runs, inclusive
  int until = kOpsetMax;
};

// The kernel of `op` for a model of opset `opset` (Graph::opset_for(node)); nullptr: none.
const CudaOpEntry* cuda_op(Op op, int opset);
// Every kernel registered for `op`, by ascending range (the backend-ops coverage check).
std::vector<CudaOpEntry> cuda_op_ranges(Op op);

struct CudaOpRegistrar {
  CudaOpRegistrar(Op op, int since, int until, CudaOpEntry entry);
};

constexpr uint32_t host_inputs_mask(std::initializer_list<int> idx) {
  uint32_t m = 0;
  for (int i : idx) m |= 1u << i;
  return m;
}

// Common dtype predicates.
bool float_types(const Node&, const std::vector<DType>& in);           // every present input f32/f16/bf16
bool float_or_int_types(const Node&, const std::vector<DType>& in);    // + i32/i64/i8/u8/bool
bool any_types(const Node&, const std::vector<DType>& in);          // every dtype but String
// The first input f32/f16/bf16 (the row kernels: softmax, norms, reductions, pools).
inline bool first_float(const Node&, const std::vector<DType>& in) {
  return !in.empty() && (in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16);
}

}  // namespace gpuopt::cuda

#define GPUOPT_CUDA_OP(NAME, ...)                                                                         \
  static ::gpuopt::cuda::CudaOpRegistrar GPUOPT_CONCAT(_gpuopt_cuda_op_, NAME)(::gpuopt::Op::NAME, 1, ::gpuopt::kOpsetMax, \
                                                                              ::gpuopt::cuda::CudaOpEntry{__VA_ARGS__})
// The kernel for opsets SINCE..UNTIL (kOpsetMax: open at the top) of one form of the op.
#define GPUOPT_CUDA_OP_RANGE(NAME, SINCE, UNTIL, ...)                                            \
  static ::gpuopt::cuda::CudaOpRegistrar GPUOPT_CONCAT(GPUOPT_CONCAT(_gpuopt_cuda_op_, NAME), SINCE)( \
      ::gpuopt::Op::NAME, SINCE, UNTIL, ::gpuopt::cuda::CudaOpEntry{__VA_ARGS__})
