// Broadcasting binary ops, variadic Sum/Mean/Min/Max, Where and Cast on the GPU.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/elementwise.h"
#include "ops/tensor/cuda/layout.h"
#include "ops/elementwise/cuda/variadic.h"

namespace gpuopt::cuda {
namespace {

template <BinaryOp kOp>
Status run_binary(CudaKernelContext& k) {
  const Tensor& a = k.in(0);
  const Tensor& b = k.in(1);
  GPUOPT_ASSIGN_OR_RETURN(BroadcastDesc d, make_broadcast(a.shape(), b.shape()));
  BinaryOp op = kOp;
  if (op == BinaryOp::kMod && k.node.attr_i("fmod", 0) == 1) op = BinaryOp::kFMod;
  return launch_binary(op, a.dtype(), a.raw(), b.raw(), k.out(0).raw(), d, k.ctx.stream);
}

// Sum/Mean/Min/Max with any number of inputs, all broadcast to the output (variadic.h).
template <VariadicOp kOp, bool kMean = false>
Status run_variadic(CudaKernelContext& k) {
  std::vector<const void*> ptrs;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (!k.inputs[i]) return k.error("input {} is absent", i);
    ptrs.push_back(k.in(i).raw());
    shapes.push_back(k.in(i).shape());
  }
  const double scale = kMean ? 1.0 / static_cast<double>(ptrs.size()) : 1.0;
  Status st = launch_variadic(kOp, k.out(0).dtype(), ptrs, shapes, k.out(0).raw(), k.out(0).shape(), scale, k.ctx.stream);
  return st.ok() ? st : k.error("{}", st.message());
}

bool same_numeric(const Node& n, const std::vector<DType>& in) {
  if (in.empty() || in.size() > 2) return false;
  for (DType t : in)
    if (t != in[0]) return false;
  return float_or_int_types(n, in) && in[0] != DType::F64;
}
bool same_float(const Node& n, const std::vector<DType>& in) { return same_numeric(n, in) && float_types(n, in); }
// Every input present and of one dtype: f32/f16/bf16 (Sum, Mean), plus i8/u8/i32/i64 (Min, Max).
bool variadic_types(const std::vector<DType>& in, bool ints) {
  if (in.empty()) return false;
  for (DType t : in)
    if (t != in[0]) return false;
  switch (in[0]) {
    case DType::F32: case DType::F16: case DType::BF16: return true;
    case DType::I8: case DType::U8: case DType::I32: case DType::I64: return ints;
    default: return false;
  }
}
bool sum_types(const Node&, const std::vector<DType>& in) { return variadic_types(in, false); }
bool min_max_types(const Node&, const std::vector<DType>& in) { return variadic_types(in, true); }
bool logic(const Node&, const std::vector<DType>& in) {
  return in.size() == 2 && in[0] == DType::Bool && in[1] == DType::Bool;
}

Status run_where(CudaKernelContext& k) {
  return launch_where(dtype_size(k.in(1).dtype()), static_cast<const bool*>(k.in(0).raw()), k.in(0).shape(),
                      k.in(1).raw(), k.in(1).shape(), k.in(2).raw(), k.in(2).shape(), k.out(0).raw(),
                      k.out(0).shape(), k.ctx.stream);
}
bool where_types(const Node&, const std::vector<DType>& in) {
  return in.size() == 3 && in[0] == DType::Bool && in[1] == in[2] && in[1] != DType::String;
}

Status run_cast(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  if (x.dtype() == k.out(0).dtype())
    return launch_unary(UnaryOp::kIdentity, x.dtype(), x.raw(), k.out(0).raw(), x.numel(), {}, k.ctx.stream);
  return launch_cast(x.dtype(), k.out(0).dtype(), x.raw(), k.out(0).raw(), x.numel(), k.ctx.stream);
}
bool cast_types(const Node& n, const std::vector<DType>& in) {
  const auto to = dtype_from_onnx(static_cast<int>(n.attr_i("to", 0)));
  if (!to || n.has_attr("saturate")) return false;
  std::vector<DType> both{in.empty() ? DType::Undefined : in[0], *to};
  return float_or_int_types(n, both);
}

}  // namespace

GPUOPT_CUDA_OP(Add, &run_binary<BinaryOp::kAdd>, &same_numeric);
GPUOPT_CUDA_OP(Sub, &run_binary<BinaryOp::kSub>, &same_numeric);
GPUOPT_CUDA_OP(Mul, &run_binary<BinaryOp::kMul>, &same_numeric);
GPUOPT_CUDA_OP(Div, &run_binary<BinaryOp::kDiv>, &same_numeric);
GPUOPT_CUDA_OP(Pow, &run_binary<BinaryOp::kPow>, &same_float);
GPUOPT_CUDA_OP(Mod, &run_binary<BinaryOp::kMod>, &same_numeric);
GPUOPT_CUDA_OP(PRelu, &run_binary<BinaryOp::kPRelu>, &same_float);
GPUOPT_CUDA_OP(Equal, &run_binary<BinaryOp::kEqual>, &same_numeric);
GPUOPT_CUDA_OP(Less, &run_binary<BinaryOp::kLess>, &same_numeric);
GPUOPT_CUDA_OP(LessOrEqual, &run_binary<BinaryOp::kLessOrEqual>, &same_numeric);
GPUOPT_CUDA_OP(Greater, &run_binary<BinaryOp::kGreater>, &same_numeric);
GPUOPT_CUDA_OP(GreaterOrEqual, &run_binary<BinaryOp::kGreaterOrEqual>, &same_numeric);
GPUOPT_CUDA_OP(And, &run_binary<BinaryOp::kAnd>, &logic);
GPUOPT_CUDA_OP(Or, &run_binary<BinaryOp::kOr>, &logic);
GPUOPT_CUDA_OP(Xor, &run_binary<BinaryOp::kXor>, &logic);
GPUOPT_CUDA_OP(Min, &run_variadic<VariadicOp::kMin>, &min_max_types);
GPUOPT_CUDA_OP(Max, &run_variadic<VariadicOp::kMax>, &min_max_types);
GPUOPT_CUDA_OP(Sum, &run_variadic<VariadicOp::kSum>, &sum_types);
GPUOPT_CUDA_OP(Mean, &run_variadic<VariadicOp::kSum, true>, &sum_types);
GPUOPT_CUDA_OP(Where, &run_where, &where_types);
GPUOPT_CUDA_OP(Cast, &run_cast, &cast_types);

}  // namespace gpuopt::cuda
