// Memory and transfer bandwidth primitives.
#include "bench/cuda/common.h"
#include "bench/gpu.h"

#include <cstring>
#include <random>

namespace gpuopt::bench {

namespace {

void fill_host_words(void* p, uint64_t bytes) {
  auto* w = static_cast<uint32_t*>(p);
  uint32_t x = 0x9e3779b9u;
  for (uint64_t i = 0; i < bytes / 4; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;  // xorshift: nonzero words
    w[i] = x;
  }
}

Result<TimingStats> time_device_side(MemTest t, uint64_t bytes, const MemParams& p, cudaStream_t st) {
  uint64_t sets = p.rotate_bytes > bytes ? (p.rotate_bytes + bytes - 1) / bytes : 1;
  sets = std::min<uint64_t>(sets, 4096);
  const bool needs_src = t != MemTest::WriteKernel, needs_dst = t != MemTest::ReadKernel;
  cuda::DeviceBuffer src, dst, xors;
  if (needs_src) {
    GPUOPT_RETURN_IF_ERROR(src.alloc(sets * bytes));
    cuda::launch_fill(cuda::FillKind::U32, src.get(), sets * bytes / 4, 17, st);
  }
  if (needs_dst) GPUOPT_RETURN_IF_ERROR(dst.alloc(sets * bytes));
  const size_t vecs = bytes / kVectorBytes;
  const int grid = cuda::memory_grid(vecs, p.device);
  GPUOPT_RETURN_IF_ERROR(xors.alloc(static_cast<size_t>(grid) * 4));
  auto op = [&](uint64_t i) -> Status {
    const uint64_t off = (i % sets) * bytes;
    char* s = src.get<char>() + (needs_src ? off : 0);
    char* d = dst.get<char>() + (needs_dst ? off : 0);
    switch (t) {
      case MemTest::MemcpyD2D:
        GPUOPT_CHECK_CALL(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, st));
        break;
      case MemTest::CopyKernel:
        cuda::launch_copy(s, d, vecs, grid, st);
        break;
      case MemTest::CopyKernelStreaming:
        cuda::launch_copy(s, d, vecs, grid, st, true);
        break;
      case MemTest::ReadKernel:
        cuda::launch_read(s, vecs, xors.get<uint32_t>(), grid, st);
        break;
      case MemTest::WriteKernel:
        cuda::launch_write(d, vecs, static_cast<uint32_t>(i), grid, st);
        break;
      default:
        return Status::Internal("not a device-side test");
    }
    return Status::Ok();
  };
  return cuda::time_on_stream(st, p.repeat, op);
}

}  // namespace

Result<TimingStats> time_memory(MemTest t, uint64_t bytes, const MemParams& p) {
  if (bytes == 0 || bytes % kVectorBytes != 0)
    return Status::InvalidArgument("size {} bytes: must be a positive multiple of {}", bytes, kVectorBytes);
  GPUOPT_CHECK_CALL(cudaSetDevice(p.device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  if (!mem_test_is_transfer(t)) return time_device_side(t, bytes, p, st.get());

  cuda::DeviceBuffer dev;
  GPUOPT_RETURN_IF_ERROR(dev.alloc(bytes));
  if (t == MemTest::P2P) {
    if (p.peer < 0 || p.peer == p.device)
      return Status::InvalidArgument("p2p needs a peer device other than {}", p.device);
    GPUOPT_ASSIGN_OR_RETURN(bool direct, can_access_peer(p.device, p.peer));
    if (direct) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(p.peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        GPUOPT_CHECK_CALL(e);
    }
    cuda::launch_fill(cuda::FillKind::U32, dev.get(), bytes / 4, 5, st.get());
    GPUOPT_CHECK_CALL(cudaSetDevice(p.peer));
    cuda::DeviceBuffer remote;
    GPUOPT_RETURN_IF_ERROR(remote.alloc(bytes));
    GPUOPT_CHECK_CALL(cudaSetDevice(p.device));
    auto op = [&](uint64_t) -> Status {
      GPUOPT_CHECK_CALL(cudaMemcpyPeerAsync(remote.get(), p.peer, dev.get(), p.device, bytes, st.get()));
      return Status::Ok();
    };
    auto r = cuda::time_on_stream(st.get(), p.repeat, op);
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
    return r;
  }
  const bool pinned = t == MemTest::H2DPinned || t == MemTest::D2HPinned;
  const bool h2d = t == MemTest::H2DPinned || t == MemTest::H2DPageable;
  cuda::HostBuffer host;
  GPUOPT_RETURN_IF_ERROR(host.alloc(bytes, pinned));
  fill_host_words(host.get(), bytes);  // also touches every page before timing
  cuda::launch_fill(cuda::FillKind::U32, dev.get(), bytes / 4, 3, st.get());
  auto op = [&](uint64_t) -> Status {
    if (h2d)
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev.get(), host.get(), bytes, cudaMemcpyHostToDevice, st.get()));
    else
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(host.get(), dev.get(), bytes, cudaMemcpyDeviceToHost, st.get()));
    return Status::Ok();
  };
  // Pageable copies are staged by the driver and partly synchronous: fewer, longer samples.
  return cuda::time_on_stream(st.get(), p.repeat, op, pinned ? 2e-4 : 1e-3, pinned ? 1000 : 20, pinned ? 3 : 1);
}

Status check_memory_kernels(int device) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  const size_t vecs = 1000003;  // not a multiple of any grid stride: exercises the tail loops
  const size_t bytes = vecs * kVectorBytes;
  cuda::DeviceBuffer src, dst, xors;
  GPUOPT_RETURN_IF_ERROR(src.alloc(bytes));
  GPUOPT_RETURN_IF_ERROR(dst.alloc(bytes));
  const int grid = cuda::memory_grid(vecs, device);
  GPUOPT_RETURN_IF_ERROR(xors.alloc(static_cast<size_t>(grid) * 4));
  std::vector<uint32_t> in(bytes / 4), out(bytes / 4);
  fill_host_words(in.data(), bytes);
  GPUOPT_CHECK_CALL(cudaMemcpy(src.get(), in.data(), bytes, cudaMemcpyHostToDevice));
  for (bool streaming : {false, true}) {
    GPUOPT_CHECK_CALL(cudaMemset(dst.get(), 0xA5, bytes));  // poison: every word must be written
    cuda::launch_copy(src.get(), dst.get(), vecs, grid, st.get(), streaming);
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
    GPUOPT_CHECK_CALL(cudaGetLastError());
    GPUOPT_CHECK_CALL(cudaMemcpy(out.data(), dst.get(), bytes, cudaMemcpyDeviceToHost));
    if (std::memcmp(in.data(), out.data(), bytes) != 0)
      return Status::Internal("copy kernel{}: output differs from input", streaming ? " (streaming)" : "");
  }

  cuda::launch_read(src.get(), vecs, xors.get<uint32_t>(), grid, st.get());
  std::vector<uint32_t> bx(grid);
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  GPUOPT_CHECK_CALL(cudaMemcpy(bx.data(), xors.get(), bx.size() * 4, cudaMemcpyDeviceToHost));
  uint32_t want = 0, got = 0;
  for (uint32_t w : in) want ^= w;
  for (uint32_t w : bx) got ^= w;
  if (want != got) return Status::Internal("read kernel: XOR {:#x}, CPU says {:#x}", got, want);

  const uint32_t seed = 0x5eed;
  GPUOPT_CHECK_CALL(cudaMemset(dst.get(), 0xA5, bytes));
  cuda::launch_write(dst.get(), vecs, seed, grid, st.get());
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  GPUOPT_CHECK_CALL(cudaMemcpy(out.data(), dst.get(), bytes, cudaMemcpyDeviceToHost));
  for (size_t j = 0; j < out.size(); ++j) {
    const uint32_t w = static_cast<uint32_t>(j) * 2654435761u ^ seed;
    if (out[j] != w) return Status::Internal("write kernel: word {} is {:#x}, expected {:#x}", j, out[j], w);
  }
  return Status::Ok();
}

}  // namespace gpuopt::bench
