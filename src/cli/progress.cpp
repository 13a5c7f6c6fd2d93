#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace gpuopt::cli {

void progress_bar(std::string_view stage, size_t done, size_t total) {
  static const bool tty = isatty(fileno(stderr));
  if (tty) {
    const int w = 30, fill = total ? static_cast<int>(w * done / total) : w;
    fmt::print(stderr, "\r{:<24} [{}{}] {}/{}", stage, std::string(static_cast<size_t>(fill), '#'),
               std::string(static_cast<size_t>(w - fill), '-'), done, total);
    if (done == total) fmt::print(stderr, "\n");
  } else if (done == total || (total >= 4 && done % (total / 4) == 0)) {
    fmt::print(stderr, "{}: {}/{}\n", stage, done, total);
  }
}

}  // namespace gpuopt::cli
