// Plain-text tables for people (every subcommand's default output; `--json` is for machines).
//
//   Table t({"size", "GB/s", "% of peak"});
//   t.add({"1 MiB", "812.3", "19%"});
//   fmt::print("{}", t.render());
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string title = {});
  void add(std::vector<std::string> row);
  void add_separator();
  // Columns whose cells look numeric are right-aligned.
  std::string render() const;
  size_t rows() const { return rows_.size(); }

 private:
  std::string title_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;  // empty row = separator
};

// "1.50 GiB", "512 B" (binary units); "812.3 GB/s" style helpers for rates.
std::string format_bytes(double bytes);
std::string format_rate(double per_second, const char* unit);  // 1.2e9,"B/s" -> "1.20 GB/s"
std::string format_duration_us(double us);  // "850 us", "1.25 ms", "3.10 s"
// "512", "64K", "1.5G", "2GiB", "300MB" -> bytes (K/M/G/T are powers of 1024); nullopt if malformed.
std::optional<size_t> parse_byte_size(std::string_view text);

}  // namespace gpuopt
