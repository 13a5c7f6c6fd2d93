// The CUDA op table (cuda_ops.h): each ops_*.cpp registers its kernels here; and the execution
// context's lazily created cuDNN handle.
#include "backends/cuda/cuda_ops.h"
#include "core/cuda_check.h"

#include <cudnn.h>

#include <array>
#include <vector>

namespace gpuopt::cuda {

Result<cudnnHandle_t> ExecContext::cudnn() {
  if (!dnn) {
    GPUOPT_CHECK_CALL(cudnnCreate(&dnn));
    GPUOPT_CHECK_CALL(cudnnSetStream(dnn, stream));
  }
  return dnn;
}

namespace {
// Per op, its kernels by ascending, disjoint opset range.
std::array<std::vector<CudaOpEntry>, kNumOps + 1>& op_table() {
  static std::array<std::vector<CudaOpEntry>, kNumOps + 1> t{};
  return t;
}
}  // namespace

const CudaOpEntry* cuda_op(Op op, int opset) {
  for (const CudaOpEntry& e : op_table()[static_cast<size_t>(op)])
    if (opset >= e.since && opset <= e.until) return &e;
  return nullptr;
}

std::vector<CudaOpEntry> cuda_op_ranges(Op op) { return op_table()[static_cast<size_t>(op)]; }

CudaOpRegistrar::CudaOpRegistrar(Op op, int since, int until, CudaOpEntry entry) {
  entry.since = since;
  entry.until = until;
  auto& v = op_table()[static_cast<size_t>(op)];
  // Overlapping registrations are a programmer bug: say which, at startup.
  for (const CudaOpEntry& e : v)
    GPUOPT_ASSERT(until < e.since || since > e.until, "CUDA op {}: range {}-{} overlaps {}-{}", op_name(op), since,
                  until, e.since, e.until);
  auto at = v.begin();
  while (at != v.end() && at->since < since) ++at;
  v.insert(at, entry);
}

namespace {
bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_basic(DType t) {
  return is_float(t) || t == DType::I32 || t == DType::I64 || t == DType::I8 || t == DType::U8 || t == DType::Bool ||
         t == DType::F64;
}
}  // namespace

bool float_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t != DType::Undefined && !is_float(t)) return false;
  return true;
}
bool float_or_int_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t != DType::Undefined && !is_basic(t)) return false;
  return true;
}
bool any_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t == DType::String) return false;  // string tensors live on the host only
  return true;
}

}  // namespace gpuopt::cuda
