// Expectations files: tests not expected to pass, each with its reason.
#include "conformance.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gpuopt::conformance {
namespace fs = std::filesystem;

Result<std::map<std::string, Expectation>> read_expectations(const std::string& dir) {
  std::map<std::string, Expectation> out;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  if (ec) return Status::NotFound("expectations folder '{}': {}", dir, ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      const size_t end = line.find_first_of(" \t", start);
      const std::string name = line.substr(start, end - start);
      std::string reason;
      if (end != std::string::npos) {
        const size_t r = line.find_first_not_of(" \t", end);
        if (r != std::string::npos) reason = line.substr(r);
      }
      if (reason.empty())
        return Status::InvalidArgument("{}:{}: test '{}' has no reason (format: `test_name  reason`)", f.string(), lineno,
                                       name);
      // The first file to list a test wins; a second listing is harmless (files are owned by
      // different people) but the reason shown is the first one.
      out.emplace(name, Expectation{reason, f.filename().string()});
    }
  }
  return out;
}

}  // namespace gpuopt::conformance
