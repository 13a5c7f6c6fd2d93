// FMA-throughput and roofline primitives, and their checks against CPU emulation.
#include "bench/cuda/common.h"
#include "bench/gpu.h"
#include "core/dtype.h"

#include <cmath>
#include <cstring>

namespace gpuopt::bench {

namespace {
int fma_iterations(FmaKind k) {
  return k == FmaKind::F64 ? 4096 : 16384;
}
size_t fma_elem_bytes(FmaKind k) {
  return k == FmaKind::F64 ? 8 : 4;
}
float h(float f) {
  return Half::to_float(Half::from_float(f));
}  // round to half
}  // namespace

Result<FmaRun> time_fma(FmaKind k, int device, int repeat) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  const int blocks = cuda::fma_blocks(static_cast<int>(k), device);
  FmaRun run;
  run.threads = static_cast<uint64_t>(blocks) * kFmaThreadsPerBlock;
  run.iterations = fma_iterations(k);
  cuda::DeviceBuffer out;
  GPUOPT_RETURN_IF_ERROR(out.alloc(run.threads * fma_elem_bytes(k)));
  auto op = [&](uint64_t) -> Status {
    cuda::launch_fma(static_cast<int>(k), out.get(), blocks, run.iterations, kFmaScale, kFmaOffset, st.get());
    return Status::Ok();
  };
  GPUOPT_ASSIGN_OR_RETURN(run.seconds, cuda::time_on_stream(st.get(), repeat, op));
  return run;
}

Status check_fma(FmaKind k, int device) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  const int blocks = 3, iterations = 1000;
  const size_t threads = static_cast<size_t>(blocks) * kFmaThreadsPerBlock;
  cuda::DeviceBuffer out;
  GPUOPT_RETURN_IF_ERROR(out.alloc(threads * fma_elem_bytes(k)));
  cuda::launch_fma(static_cast<int>(k), out.get(), blocks, iterations, kFmaScale, kFmaOffset, nullptr);
  GPUOPT_CHECK_CALL(cudaDeviceSynchronize());
  GPUOPT_CHECK_CALL(cudaGetLastError());
  std::vector<uint8_t> got(threads * fma_elem_bytes(k));
  GPUOPT_CHECK_CALL(cudaMemcpy(got.data(), out.get(), got.size(), cudaMemcpyDeviceToHost));
  for (size_t tid = 0; tid < threads; ++tid) {
    if (k == FmaKind::F32 || k == FmaKind::F64) {
      // fmaf/fma round once, as the GPU does: results must match bit for bit.
      double want = 0, have = 0;
      if (k == FmaKind::F32) {
        float x[kFmaChains], sum = 0;
        for (int j = 0; j < kFmaChains; ++j) x[j] = fma_chain_start(tid, j);
        for (int i = 0; i < iterations; ++i)
          for (float& v : x) v = std::fmaf(v, kFmaScale, kFmaOffset);
        sum = x[0];
        for (int j = 1; j < kFmaChains; ++j) sum += x[j];
        want = sum;
        have = reinterpret_cast<const float*>(got.data())[tid];
      } else {
        double x[kFmaChains], sum = 0;
        for (int j = 0; j < kFmaChains; ++j) x[j] = fma_chain_start(tid, j);
        for (int i = 0; i < iterations; ++i)
          for (double& v : x) v = std::fma(v, static_cast<double>(kFmaScale), static_cast<double>(kFmaOffset));
        sum = x[0];
        for (int j = 1; j < kFmaChains; ++j) sum += x[j];
        want = sum;
        have = reinterpret_cast<const double*>(got.data())[tid];
      }
      if (want != have) return Status::Internal("fma {} thread {}: GPU {} CPU {}", fma_kind_name(k), tid, have, want);
    } else {
      // half2: emulate each lane with float FMA rounded to half; allow one half ulp of drift.
      const float s = h(kFmaScale), t = h(kFmaOffset);
      for (int lane = 0; lane < 2; ++lane) {
        float x[kFmaChains];
        for (int j = 0; j < kFmaChains; ++j) x[j] = h(lane ? fma_chain_start(tid, j) * 0.75f : fma_chain_start(tid, j));
        for (int i = 0; i < iterations; ++i)
          for (float& v : x) v = h(std::fmaf(v, s, t));
        float sum = x[0];
        for (int j = 1; j < kFmaChains; ++j) sum = h(sum + x[j]);
        const uint16_t bits = reinterpret_cast<const uint16_t*>(got.data())[tid * 2 + lane];
        const float have = Half::to_float(bits);
        if (!(std::fabs(have - sum) <= 1e-2f * std::fabs(sum)))
          return Status::Internal("fma f16x2 thread {} lane {}: GPU {} CPU {}", tid, lane, have, sum);
      }
    }
  }
  return Status::Ok();
}

Result<TimingStats> time_roofline(RooflineType t, uint64_t words, int flops_per_word, int device, int repeat) {
  RooflineOps ops;
  if (!roofline_ops(t, flops_per_word, &ops))
    return Status::InvalidArgument("roofline: {} FLOPs per word is not a power of two in 1..8192", flops_per_word);
  if (words == 0 || words % 4)
    return Status::InvalidArgument("roofline: {} words is not a positive multiple of 4", words);
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  cuda::DeviceBuffer src, dst;
  GPUOPT_RETURN_IF_ERROR(src.alloc(words * 4));
  GPUOPT_RETURN_IF_ERROR(dst.alloc(words * 4));
  if (t == RooflineType::F32)
    cuda::launch_fill(cuda::FillKind::F32, src.get(), words, 11, st.get());
  else
    cuda::launch_fill(cuda::FillKind::F16, src.get(), words * 2, 11, st.get());
  auto op = [&](uint64_t) -> Status {
    cuda::launch_roofline(static_cast<int>(t), src.get(), dst.get(), words, ops.scalar_muls, ops.vector_muls, ops.fmas,
                          kFmaScale, kFmaOffset, device, st.get());
    return Status::Ok();
  };
  return cuda::time_on_stream(st.get(), repeat, op);
}

Status check_roofline(RooflineType t, int flops_per_word, int device) {
  RooflineOps ops;
  if (!roofline_ops(t, flops_per_word, &ops)) return Status::InvalidArgument("bad flops per word {}", flops_per_word);
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  // An odd number of vectors, several per thread of a full grid: both the paired loop and the
  // tail of the kernel run.
  const size_t words = 4 * 1234567;
  cuda::DeviceBuffer src, dst;
  GPUOPT_RETURN_IF_ERROR(src.alloc(words * 4));
  GPUOPT_RETURN_IF_ERROR(dst.alloc(words * 4));
  if (t == RooflineType::F32)
    cuda::launch_fill(cuda::FillKind::F32, src.get(), words, 23, nullptr);
  else
    cuda::launch_fill(cuda::FillKind::F16, src.get(), words * 2, 23, nullptr);
  GPUOPT_CHECK_CALL(cudaMemset(dst.get(), 0xFF, words * 4));  // NaN poison
  cuda::launch_roofline(static_cast<int>(t), src.get(), dst.get(), words, ops.scalar_muls, ops.vector_muls, ops.fmas,
                        kFmaScale, kFmaOffset, device, nullptr);
  GPUOPT_CHECK_CALL(cudaDeviceSynchronize());
  GPUOPT_CHECK_CALL(cudaGetLastError());
  std::vector<uint32_t> in(words), out(words);
  GPUOPT_CHECK_CALL(cudaMemcpy(in.data(), src.get(), words * 4, cudaMemcpyDeviceToHost));
  GPUOPT_CHECK_CALL(cudaMemcpy(out.data(), dst.get(), words * 4, cudaMemcpyDeviceToHost));
  const size_t step = flops_per_word <= 64 ? 1 : 61;  // long chains: check a sample of words
  for (size_t i = 0; i < words; i += step) {
    if (t == RooflineType::F32) {
      float x, y;
      std::memcpy(&x, &in[i], 4);
      std::memcpy(&y, &out[i], 4);
      if (ops.scalar_muls) x *= kFmaScale;
      for (int k = 0; k < ops.fmas; ++k) x = std::fmaf(x, kFmaScale, kFmaOffset);
      if (x != y) return Status::Internal("roofline f32 f={} word {}: GPU {} CPU {}", flops_per_word, i, y, x);
    } else {
      const float s = h(kFmaScale), tt = h(kFmaOffset);
      for (int lane = 0; lane < 2; ++lane) {
        float x = Half::to_float(static_cast<uint16_t>(in[i] >> (16 * lane)));
        const float y = Half::to_float(static_cast<uint16_t>(out[i] >> (16 * lane)));
        if (ops.scalar_muls && lane == 0) x = h(x * s);
        if (ops.vector_muls) x = h(x * s);
        for (int k = 0; k < ops.fmas; ++k) x = h(std::fmaf(x, s, tt));
        if (!(std::fabs(x - y) <= 2e-3f * std::max(1.0f, std::fabs(x))))
          return Status::Internal("roofline f16 f={} word {} lane {}: GPU {} CPU {}", flops_per_word, i, lane, y, x);
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpuopt::bench
