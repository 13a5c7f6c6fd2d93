// The one op table. Each op is one line in ops_{nn,math,tensor}.inc:  X(Conv)
// and, for each, three free functions the build requires (a missing one fails to link):
//
//   Status  infer_Conv(InferContext& ctx);   // types and shapes; validation; names node on error
//   Status  cpu_Conv(KernelContext& ctx);    // CPU reference kernel (the test oracle)
//   double  flops_Conv(const FlopsContext& ctx);  // estimated FLOPs for `gpuopt inspect`
//
// Versions (registration by opset range, as ONNX Runtime registers kernels): infer_X/cpu_X
// implement the op's newest ONNX form. Where ONNX changed what the op means (Softmax before 13,
// Reduce* axes as an input, ...), each older form is one line V(X, since, until) in
// ops_versions.inc and is implemented by infer_X_v<since>/cpu_X_v<since> beside the newest; the
// newest then covers the opsets after the last older range. A kernel never reads the opset: the
// model's opset for the node's domain picks the version (op_version).
//
// Shape inference runs at load time on partial information (unknown or symbolic dims, constant
// values only where known) and again at run time with every input's value present; kernels
// receive outputs already allocated with the inferred dtype and shape.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "ir/attribute.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpuopt {

#include "ir/ops_math.inc"
#include "ir/ops_nn.inc"
#include "ir/ops_tensor.inc"
#include "ir/ops_transformer.inc"
#include "ir/ops_misc.inc"
#include "ir/ops_versions.inc"

#define GPUOPT_OPS(X) \
  GPUOPT_OPS_NN(X) GPUOPT_OPS_MATH(X) GPUOPT_OPS_TENSOR(X) GPUOPT_OPS_TRANSFORMER(X) GPUOPT_OPS_MISC(X)

enum class Op : uint16_t {
#define GPUOPT_X(name) name,
  GPUOPT_OPS(GPUOPT_X)
#undef GPUOPT_X
  kCount
};

constexpr size_t kNumOps = static_cast<size_t>(Op::kCount);

struct Node;

// What shape inference knows about one value.
struct ValueInfo {
  DType dtype = DType::Undefined;
  bool rank_known = false;
  Shape shape;                    // valid when rank_known; dims may be unknown/symbolic at load time
  const Tensor* value = nullptr;  // constant value when known (always at run time)
  // Shape arithmetic at load time: the elements of a small 1-D (or 0-D) integer tensor computed
  // from shapes (Shape, Gather/Slice/Concat/Unsqueeze/Squeeze/Cast): dims as in `shape` (>= 0, < -1
  // a symbol) or a literal -1 from a constant (Reshape's infer), when `value` is not. Else empty.
  // Reshape reads it, so a target computed from Shape keeps its known dims (docs/dev/DESIGN.md).
  std::optional<std::vector<int64_t>> dims_value = std::nullopt;
};

struct InferContext {
  const Node& node;
  std::vector<const ValueInfo*> inputs;  // nullptr for an absent optional input
  std::vector<ValueInfo> outputs;        // sized to the node's output count; fill dtype/shape

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const ValueInfo& in(size_t i) const { return *inputs[i]; }
  // Error that names the op and node: "[Conv] node 'conv1': <message>".
  template <typename... Args>
  Status error(fmt::format_string<Args...> f, Args&&... args) const;
};

struct KernelContext {
  const Node& node;
  std::vector<const Tensor*> inputs;  // nullptr for an absent optional input
  std::vector<Tensor*> outputs;       // allocated, dtype and shape as inferred; nullptr = optional output not requested

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const Tensor& in(size_t i) const { return *inputs[i]; }
  Tensor& out(size_t i) const { return *outputs[i]; }
  template <typename... Args>
  Status error(fmt::format_string<Args...> f, Args&&... args) const;
};

struct FlopsContext {
  const Node& node;
  std::vector<const ValueInfo*> inputs;
  std::vector<const ValueInfo*> outputs;
};

using InferFn = Status (*)(InferContext&);
using CpuKernelFn = Status (*)(KernelContext&);
using FlopsFn = double (*)(const FlopsContext&);

#define GPUOPT_X(name)                   \
  Status infer_##name(InferContext& ctx); \
  Status cpu_##name(KernelContext& ctx);  \
  double flops_##name(const FlopsContext& ctx);
GPUOPT_OPS(GPUOPT_X)
#undef GPUOPT_X
#define GPUOPT_V(name, since, until)                 \
  Status infer_##name##_v##since(InferContext& ctx); \
  Status cpu_##name##_v##since(KernelContext& ctx);
GPUOPT_OP_VERSIONS(GPUOPT_V)
#undef GPUOPT_V

constexpr int kOpsetMax = 1 << 30;  // `until` of a range open at the top

// One form of an op for opsets since..until (inclusive) of its domain.
struct OpVersion {
  int since = 1;
  int until = kOpsetMax;
  InferFn infer = nullptr;
  CpuKernelFn cpu = nullptr;
};

struct OpDef {
  Op op;
  std::string_view name;  // ONNX op_type
  FlopsFn flops;          // FLOPs do not depend on the form
  std::vector<OpVersion> versions;  // ascending, disjoint; the last is the newest form
};

const OpDef& op_def(Op op);
std::string_view op_name(Op op);
// The form of `op` for a model whose opset (of the node's domain) is `opset`; nullptr when no
// range holds it.
const OpVersion* op_version(Op op, int opset);
// The same for a node, or the error that names op, opset and node:
// "[Upsample] node 'up': opset 11 is outside every version gpuopt implements (1-8, 9)".
Result<const OpVersion*> node_version(const Node& node, int opset);
// "1-12, 13+": the opset ranges of `op`, for messages and docs.
std::string op_ranges(Op op);
// ONNX op_type (default domain) -> Op; nullopt when gpuopt does not know it.
std::optional<Op> op_from_name(std::string_view onnx_op_type);

// "[Conv] node 'conv1'": the prefix every op error starts with.
std::string node_label(const Node& node);

template <typename... Args>
Status InferContext::error(fmt::format_string<Args...> f, Args&&... args) const {
  return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status KernelContext::error(fmt::format_string<Args...> f, Args&&... args) const {
  return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gpuopt
