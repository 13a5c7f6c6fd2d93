#include "core/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace gpuopt {

Table::Table(std::vector<std::string> header, std::string title) : title_(std::move(title)), header_(std::move(header)) {}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

void Table::add_separator() { rows_.emplace_back(); }

namespace {
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  const char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+' || c == '.') && s.size() > 1);
}
}  // namespace

std::string Table::render() const {
  const size_t n = header_.size();
  std::vector<size_t> w(n, 0);
  std::vector<bool> right(n, true);
  for (size_t c = 0; c < n; ++c) w[c] = header_[c].size();
  for (const auto& r : rows_) {
    for (size_t c = 0; c < r.size(); ++c) {
      w[c] = std::max(w[c], r[c].size());
      if (!r[c].empty() && !looks_numeric(r[c]) && r[c] != "n/a" && r[c] != "-") right[c] = false;
    }
  }
  right[0] = false;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < n; ++c) {
      const std::string& s = cells[c];
      const size_t pad = w[c] - std::min(w[c], s.size());
      if (c) out += "  ";
      if (right[c]) out += std::string(pad, ' ') + s;
      else out += s + (c + 1 < n ? std::string(pad, ' ') : "");
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  size_t total = 0;
  for (size_t c = 0; c < n; ++c) total += w[c] + (c ? 2 : 0);
  std::string out;
  if (!title_.empty()) out += title_ + "\n";
  out += line(header_);
  out += std::string(total, '-') + "\n";
  for (const auto& r : rows_) out += r.empty() ? std::string(total, '-') + "\n" : line(r);
  return out;
}

std::string format_bytes(double b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", b, kUnits[u]) : fmt::format("{:.2f} {}", b, kUnits[u]);
}

std::string format_rate(double v, const char* unit) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (v >= 1000.0 && p < 5) {
    v /= 1000.0;
    ++p;
  }
  return fmt::format("{:.2f} {}{}", v, kPrefix[p], unit);
}

std::string format_duration_us(double us) {
  if (us < 1000.0) return fmt::format("{:.1f} us", us);
  if (us < 1e6) return fmt::format("{:.2f} ms", us / 1000.0);
  return fmt::format("{:.2f} s", us / 1e6);
}

std::optional<size_t> parse_byte_size(std::string_view t) {
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  const double v = std::strtod(std::string(t.substr(0, i)).c_str(), nullptr);
  std::string unit(t.substr(i));
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mul = 1;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mul = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  if (v < 0) return std::nullopt;
  return static_cast<size_t>(v * mul);
}

}  // namespace gpuopt
