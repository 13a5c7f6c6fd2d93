#include "ops/transformer/cuda/rotary.h"

#include "backends/cuda/kernels/float_convert.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

using kern::ld;
using kern::st;

// Element i of x: its row (b, s, h) and index j in the head. The rotated pairs are (j, j + rot/2)
// or, interleaved, (2k, 2k + 1); j >= rot is copied.
template <typename T>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cosc, const T* __restrict__ sinc,
                              const int64_t* __restrict__ pos, T* __restrict__ y, int64_t n, int64_t heads,
                              int64_t seq, int64_t head, int64_t rot, int64_t max_pos, bool four_d, bool interleaved) {
  const int64_t half = rot / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % head;
    if (j >= rot) {
      y[i] = x[i];
      continue;
    }
    const int64_t r = i / head;  // [B, H, S] or [B, S, H] row
    int64_t b, s;
    if (four_d) {
      s = r % seq;
      b = r / (seq * heads);
    } else {
      s = (r / heads) % seq;
      b = r / (heads * seq);
    }
    int64_t row = b * seq + s;
    if (pos) {
      row = pos[b * seq + s];
      if (row < 0 || row >= max_pos) {
        st(y, i, 0.f);
        continue;
      }
    }
    const int64_t k = interleaved ? j / 2 : (j < half ? j : j - half);
    const bool first = interleaved ? (j % 2 == 0) : (j < half);
    const int64_t partner = interleaved ? (first ? i + 1 : i - 1) : (first ? i + half : i - half);
    const float c = ld(cosc, row * half + k), sn = ld(sinc, row * half + k);
    const float xi = ld(x, i), xp = ld(x, partner);
    st(y, i, first ? c * xi - sn * xp : sn * xp + c * xi);
  }
}

template <typename T>
void launch_t(const RotaryArgs& a, cudaStream_t s) {
  const int64_t n = a.batch * a.heads * a.seq * a.head;
  rotary_kernel<T><<<kern::grid_for(n, 256), 256, 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.cos), static_cast<const T*>(a.sin), a.pos,
      static_cast<T*>(a.y), n, a.heads, a.seq, a.head, a.rot, a.max_pos, a.four_d, a.interleaved);
}

}  // namespace

Status launch_rotary(const RotaryArgs& a, cudaStream_t s) {
  if (a.batch * a.heads * a.seq * a.head == 0) return Status::Ok();
  switch (a.dt) {
    case DType::F32: launch_t<float>(a, s); break;
    case DType::F16: launch_t<__half>(a, s); break;
    case DType::BF16: launch_t<__nv_bfloat16>(a, s); break;
    default: return Status::InvalidArgument("RotaryEmbedding on CUDA takes f32, f16 or bf16, not {}", dtype_name(a.dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
