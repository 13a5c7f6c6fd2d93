#include "core/device.h"


#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace gpuopt {

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cpu-ref") return kCpuReference;
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view kCuda = "cuda:";
  if (text.substr(0, kCuda.size()) == kCuda) {
    const std::string_view digits = text.substr(kCuda.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    // Digits only: no sign, no spaces, no trailing text; an index beyond any real host is refused.
    const bool plain = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (plain && ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && index < 4096)
      return Device::cuda(index);
    return Status::InvalidArgument("device '{}': the CUDA device index must be a number from 0 to 4095 (cuda:N)", text);
  }
  return Status::InvalidArgument("unknown device '{}': expected cpu, cpu-ref, cuda or cuda:N", text);
}

std::string cuda_device_count_phrase(int count) {
  if (count <= 0) return "this host has no CUDA device";
  return fmt::format("this host has {} CUDA device{}", count, count == 1 ? "" : "s");
}

Device::Device(const char* literal) {
  auto d = parse_device(literal ? literal : "");
  if (!d.ok()) {
    std::fprintf(stderr, "gpuopt: programmer error: %s\n", d.status().message().c_str());
    std::abort();
  }
  *this = *d;
}

}  // namespace gpuopt
