// upload_inline (backends/cuda/upload.h): host bytes carried as kernel parameters, 32,704 per
// launch, compared byte for byte with what cudaMemcpy reads back, across chunk edges, odd tails
// and a destination that is not 16-byte aligned.
#include "backends/cuda/upload.h"
#include "cuda_test_util.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace gpuopt::cuda {
namespace {

TEST(UploadInline, EveryByteArrivesAcrossChunkEdgesAndOffsets) {
  GPUOPT_REQUIRE_CUDA();
  constexpr size_t kMax = kInlineUploadMax + 64;
  unsigned char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, kMax + 16), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{8}}) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4096}, size_t{32703}, size_t{32704},
                     size_t{32705}, size_t{65408}, kInlineUploadMax}) {
      std::vector<unsigned char> host(n), back(n + 2, 0);
      for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>((i * 131 + n + offset) & 0xff);
      ASSERT_EQ(cudaMemset(dev, 0xee, kMax + 16), cudaSuccess);
      ASSERT_TRUE(upload_inline(host.data(), dev + offset + 1, n, s).ok());
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(back.data(), dev + offset, n + 2, cudaMemcpyDeviceToHost), cudaSuccess);
      // The byte before and after stay untouched.
      EXPECT_EQ(back[0], 0xee) << "offset " << offset << " n " << n;
      EXPECT_EQ(back[n + 1], 0xee) << "offset " << offset << " n " << n;
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(back[i + 1], host[i]) << "byte " << i << " of " << n << " at offset " << offset + 1;
    }
  }
  // Aligned destination (the pool's case).
  std::vector<unsigned char> host(40000), back(40000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  ASSERT_TRUE(upload_inline(host.data(), dev, host.size(), s).ok());
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), dev, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  cudaStreamDestroy(s);
  cudaFree(dev);
}

}  // namespace
}  // namespace gpuopt::cuda
