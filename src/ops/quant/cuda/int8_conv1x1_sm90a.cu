// The sm_90a kernel behind int8_conv1x1.h: a CUTLASS 3.x int8 GEMM (TMA loads, wgmma, persistent
// cooperative 256x128x128 tiles, cluster 1x2: the fastest of five configurations in
// an A/B run at ResNet-50's shapes, docs/perf-notes.md) whose epilogue visitor tree has one compute node over
// the int32 sums, the residual (the C tensor, TMA-loaded int8), alpha[m] and beta[m] (row
// broadcasts) and the node's own scalars. Compiled for sm_90a only (src/CMakeLists.txt).
#include "ops/quant/cuda/int8_conv1x1.h"

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

namespace gpuopt::cuda {
namespace {

using namespace cute;

struct ResArgs {
  float res_scale = 1.f, z_scale = 1.f;
  int relu = 0, residual_relu = 0;
};

__device__ __forceinline__ float sat8(float v) {
  return fminf(fmaxf(rintf(v), -128.f), 127.f);
}

// Sm90Compute converts every child's fragment to float, calls Fn<Array<float, N>>{}(children...,
// arguments) and converts the (integral, in-range) result to int8.
template <class FragF>
struct ResFn {
  using Arguments = ResArgs;
  CUTLASS_DEVICE FragF operator()(FragF const& acc, FragF const& z, FragF const& alpha, FragF const& beta,
                                  Arguments const& p) const {
    FragF out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < FragF::kElements; ++i) {
      float v = fmaf(acc[i], alpha[i], beta[i]);
      if (p.relu) v = fmaxf(v, 0.f);
      float r = fmaf(sat8(v), p.res_scale, z[i] * p.z_scale);
      if (p.residual_relu) r = fmaxf(r, 0.f);
      out[i] = sat8(r);
    }
    return out;
  }
};

using Tile = Shape<_256, _128, _128>;
using Cluster = Shape<_1, _2, _1>;
using RowVec = cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tile, float, float>;
using Evt = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<ResFn, int8_t, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, cutlass::epilogue::fusion::Sm90SrcFetch<int8_t>, RowVec, RowVec>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
    int32_t, float, int8_t, cutlass::layout::RowMajor, 16, int8_t, cutlass::layout::RowMajor, 16,
    cutlass::epilogue::TmaWarpSpecializedCooperative, Evt>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, 16, int8_t,
    cutlass::layout::ColumnMajor, 16, int32_t, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

template <class S>
S packed(int64_t ld, int64_t batch) {  // every operand: Stride<int64_t, _1, int64_t>
  S s{};
  get<0>(s) = ld;
  get<2>(s) = batch;
  return s;
}

typename Gemm::Arguments arguments(const Int8Conv1x1Residual& a) {
  const int rows = static_cast<int>(a.rows), m = static_cast<int>(a.m), c = static_cast<int>(a.c);
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {rows, m, c, 1};
  args.mainloop.ptr_A = a.x;
  args.mainloop.dA = packed<typename Kernel::StrideA>(c, a.rows * c);
  args.mainloop.ptr_B = a.w;
  args.mainloop.dB = packed<typename Kernel::StrideB>(c, a.m * c);
  auto& f = args.epilogue.thread;  // children in order (acc, C, alpha, beta), then the node's own
  get<2>(f).ptr_row = a.alpha;
  get<3>(f).ptr_row = a.beta;
  get<4>(f) = ResArgs{a.res_scale, a.z_scale, a.relu ? 1 : 0, a.residual_relu ? 1 : 0};
  args.epilogue.ptr_C = a.z;
  args.epilogue.dC = packed<typename Kernel::StrideC>(m, a.rows * m);
  args.epilogue.ptr_D = a.y;
  args.epilogue.dD = packed<typename Kernel::StrideD>(m, a.rows * m);
  args.hw_info.device_id = a.device;
  args.hw_info.sm_count = a.sm_count;
  return args;
}

bool fits(const Int8Conv1x1Residual& a) {
  return a.rows > 0 && a.rows <= INT32_MAX && a.c > 0 && a.m > 0 && a.c % 16 == 0 && a.m % 16 == 0;
}

}  // namespace

bool int8_conv1x1_device(int device, int* sm_count) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(sm_count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

size_t int8_conv1x1_workspace(const Int8Conv1x1Residual& a) {
  return fits(a) ? Gemm::get_workspace_size(arguments(a)) : 0;
}

Status launch_int8_conv1x1_residual(const Int8Conv1x1Residual& a, cudaStream_t s) {
  if (!fits(a)) return Status::Unimplemented("Int8Conv 1x1 (CUTLASS sm90): rows={} c={} m={} do not fit", a.rows, a.c, a.m);
  const auto args = arguments(a);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return Status::Unimplemented("Int8Conv 1x1 (CUTLASS sm90): rows={} c={} m={} refused by can_implement", a.rows, a.c, a.m);
  if (Gemm::get_workspace_size(args) > a.workspace_bytes)
    return Status::Unimplemented("Int8Conv 1x1 (CUTLASS sm90): needs {} bytes of workspace, has {}",
                                 Gemm::get_workspace_size(args), a.workspace_bytes);
  cutlass::Status st = gemm.initialize(args, a.workspace, s);
  if (st == cutlass::Status::kSuccess) st = gemm.run(s);
  if (st != cutlass::Status::kSuccess)
    return Status::Internal("Int8Conv 1x1 (CUTLASS sm90): {} (rows={} c={} m={}; CUDA: {})",
                            cutlass::cutlassGetStatusString(st), a.rows, a.c, a.m, cudaGetErrorString(cudaGetLastError()));
  return Status::Ok();
}

}  // namespace gpuopt::cuda
