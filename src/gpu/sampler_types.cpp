#include "gpu/sampler_types.h"

#include <fmt/format.h>

namespace gpuopt::gpu {

std::optional<double> memory_used_fraction(const GpuSample& g) {
  if (!g.mem_used_bytes) return std::nullopt;
  // NVML v2: total = used + free + reserved; prefer the sum, so reserved counts as unavailable
  // and the fraction matches what an allocation can still get.
  double total = 0;
  if (g.mem_total_bytes) total = double(*g.mem_total_bytes);
  else if (g.mem_free_bytes) total = double(*g.mem_used_bytes + *g.mem_free_bytes + g.mem_reserved_bytes.value_or(0));
  if (total <= 0) return std::nullopt;
  double used = double(*g.mem_used_bytes + g.mem_reserved_bytes.value_or(0));
  return used / total;
}

std::string na_or(const std::optional<unsigned>& v, const char* suffix) {
  return v ? fmt::format("{}{}", *v, suffix) : std::string("n/a");
}

std::string na_or(const std::optional<double>& v, int decimals, const char* suffix) {
  return v ? fmt::format("{:.{}f}{}", *v, decimals, suffix) : std::string("n/a");
}

}  // namespace gpuopt::gpu
