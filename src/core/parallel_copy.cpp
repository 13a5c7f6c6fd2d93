#include "core/parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace gpuopt {

void parallel_memcpy(void* dst, const void* src, size_t n, unsigned max_threads) {
  if (n == 0) return;  // an empty tensor may have no buffer at all (null), which memcpy forbids
  if (max_threads == 0) {
    const unsigned hw = std::thread::hardware_concurrency();
    max_threads = hw >= 4 ? std::min(hw / 2, 8u) : 1u;
  }
  constexpr size_t kPerThread = size_t{2} << 20;  // below this a thread costs more than it saves
  const size_t parts = std::min<size_t>(max_threads, n / kPerThread);
  if (n < kParallelCopyMin || parts < 2) {
    std::memcpy(dst, src, n);
    return;
  }
  // Chunks of whole cache lines; the calling thread takes the first one.
  const size_t chunk = (n / parts + 63) / 64 * 64;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  std::vector<std::thread> helpers;
  helpers.reserve(parts - 1);
  for (size_t off = chunk; off < n; off += chunk) {
    const size_t len = std::min(chunk, n - off);
    helpers.emplace_back([=] { std::memcpy(d + off, s + off, len); });
  }
  std::memcpy(d, s, std::min(chunk, n));
  for (auto& t : helpers) t.join();
}

}  // namespace gpuopt
