// FLOP and byte counts of every benchmark kernel, by construction: the kernels read their
// operation counts from these functions (so the GPU runs exactly what is counted) and the tests
// check the arithmetic on the CPU.
//
//   WorkCount w = copy_count(1 << 30);        // 2 GiB moved: 1 GiB read + 1 GiB written
//   double gbps = w.bytes / seconds / 1e9;
//
// Byte convention everywhere: bytes read from + bytes written to device memory (a copy of N
// bytes counts 2N), as nvbandwidth's device-local copy and PyTorch's anchor figures do.
#pragma once

#include <cstdint>

namespace gpuopt::bench {

struct WorkCount {
  double flops = 0;  // floating-point (or integer, for int8 GEMM) operations
  double bytes = 0;  // device-memory bytes read + written (or sent over the link, for transfers)
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

// ---- memory kernels (no arithmetic) ---------------------------------------------------------
constexpr int kVectorBytes = 16;           // every memory kernel moves 16-byte vectors (uint4)
WorkCount copy_count(uint64_t bytes);      // read `bytes` + write `bytes`
WorkCount read_count(uint64_t bytes);      // read only
WorkCount write_count(uint64_t bytes);     // write only
WorkCount transfer_count(uint64_t bytes);  // H2D, D2H, P2P: bytes crossing the link once

// ---- FMA throughput kernels (no tensor cores) -------------------------------------------------
enum class FmaKind { F32, F16x2, F64 };
const char* fma_kind_name(FmaKind k);  // "f32", "f16x2", "f64"
constexpr int kFmaChains = 8;          // independent dependency chains per thread (latency hiding)
constexpr int kFmaThreadsPerBlock = 256;
// FLOPs of one fused multiply-add instruction: 2 for f32/f64, 4 for f16x2 (two lanes).
int fma_flops_per_instruction(FmaKind k);
// Each chain computes x = x * kFmaScale + kFmaOffset (fixed point 1: values stay bounded).
constexpr float kFmaScale = 0.99f, kFmaOffset = 0.01f;
// Start of chain j in thread `tid`: distinct per thread, in [0.5, 0.75).
constexpr float fma_chain_start(uint64_t tid, int j) {
  return 0.5f + static_cast<float>((tid * 7 + static_cast<uint64_t>(j) * 13) % 256) / 1024.0f;
}
// `threads` threads each run `iterations` rounds of kFmaChains FMAs, combine the chains with
// kFmaChains - 1 adds (1 FLOP each, 2 for f16x2) and store one element at the end.
WorkCount fma_count(FmaKind k, uint64_t threads, int iterations);

// ---- roofline kernel family (mixbench style) -------------------------------------------------
// Each 4-byte word (one f32, or one half2) is read once and written once: 8 bytes. At
// `flops_per_word` = f (a power of two, 1..8192) the intensity is f/8 FLOP/byte, 1/8..1024.
enum class RooflineType { F32, F16 };
const char* roofline_type_name(RooflineType t);
constexpr int kRooflineBytesPerWord = 8;
struct RooflineOps {
  int scalar_muls = 0;  // one-lane multiplies (1 FLOP)
  int vector_muls = 0;  // half2 multiplies (2 FLOPs); f16 only
  int fmas = 0;         // f32 FMA (2 FLOPs) or half2 FMA (4 FLOPs)
};
// The instruction sequence applied to each word for a given FLOP count. Returns false when
// `flops_per_word` is not a power of two in 1..8192.
bool roofline_ops(RooflineType t, int flops_per_word, RooflineOps* ops);
// FLOPs the ops above perform on one word (equals flops_per_word for valid inputs).
int roofline_ops_flops(RooflineType t, const RooflineOps& ops);
WorkCount roofline_count(RooflineType t, uint64_t words, int flops_per_word);
// Intensity (FLOP/byte) -> flops per word; 0 when the intensity is not one of 1/8, 1/4, ..., 1024.
int roofline_flops_for_intensity(double intensity);

// ---- matrix multiply -------------------------------------------------------------------------
// C[m,n] = A[m,k] * B[k,n]: 2mnk operations; the fewest bytes are each input read once and the
// output written once.
WorkCount gemm_count(uint64_t m, uint64_t n, uint64_t k, int in_bytes, int out_bytes);

}  // namespace gpuopt::bench
