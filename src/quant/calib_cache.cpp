// Calibration cache text format (calib_cache.h).
#include "quant/calib_cache.h"

#include "quant/calibrate.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

namespace gpuopt::quant {

namespace {
constexpr const char* kTag = "gpuopt-calibration-cache 1";
}

Status write_calibration_cache(const std::string& path, const std::map<std::string, double>& amax, const std::string& comment) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return Status::InvalidArgument("calibration cache '{}': cannot create", path);
  f << kTag << "\n# " << comment << "\n";
  for (const auto& [name, a] : amax) f << fmt::format("{}: {:.9g}\n", name, int8_scale(a));
  if (!f) return Status::InvalidArgument("calibration cache '{}': write failed", path);
  return Status::Ok();
}

Result<std::map<std::string, double>> read_calibration_cache(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("calibration cache '{}': cannot open", path);
  std::string line;
  if (!std::getline(f, line) || line != kTag)
    return Status::InvalidArgument("calibration cache '{}': line 1 is not '{}'", path, kTag);
  std::map<std::string, double> out;
  for (int ln = 2; std::getline(f, line); ++ln) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sep = line.rfind(": ");
    if (sep == std::string::npos || sep == 0)
      return Status::InvalidArgument("calibration cache '{}' line {}: expected '<tensor>: <scale>'", path, ln);
    const std::string v = line.substr(sep + 2);
    char* end = nullptr;
    const double s = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(s) || s <= 0)
      return Status::InvalidArgument("calibration cache '{}' line {}: scale '{}' is not a positive number", path, ln, v);
    out[line.substr(0, sep)] = static_cast<double>(static_cast<float>(s)) * 127.0;
  }
  if (out.empty()) return Status::InvalidArgument("calibration cache '{}': no tensors", path);
  return out;
}

}  // namespace gpuopt::quant
