#include "monitor/prom_text.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuopt::gpu {

namespace {

void append_escaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') out->append("\\\\");
    else if (c == '\n') out->append("\\n");
    else if (quote && c == '"') out->append("\\\"");
    else out->push_back(c);
  }
}

void append_value(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else if (v == std::trunc(v) && std::fabs(v) < 9.007199254740992e15) {
    // Whole numbers (counters, MiB, MHz) exactly, without an exponent.
    fmt::format_to(std::back_inserter(*out), "{}", static_cast<long long>(v));
  } else {
    fmt::format_to(std::back_inserter(*out), "{}", v);  // shortest round-trip form
  }
}

}  // namespace

void prom_family(std::string* out, std::string_view name, std::string_view help, PromType type) {
  out->append("# HELP ").append(name).push_back(' ');
  append_escaped(out, help, false);
  out->append("\n# TYPE ").append(name);
  switch (type) {
    case PromType::kGauge: out->append(" gauge\n"); break;
    case PromType::kCounter: out->append(" counter\n"); break;
    case PromType::kUntyped: out->append(" untyped\n"); break;
  }
}

void prom_label(std::string* labels, std::string_view key, std::string_view value) {
  if (!labels->empty()) labels->push_back(',');
  labels->append(key).append("=\"");
  append_escaped(labels, value, true);
  labels->push_back('"');
}

static void append_timestamp(std::string* out, int64_t timestamp_ms) {
  if (timestamp_ms > 0) fmt::format_to(std::back_inserter(*out), " {}", timestamp_ms);
  out->push_back('\n');
}

void prom_sample(std::string* out, std::string_view name, std::string_view labels, double value,
                 int64_t timestamp_ms) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->push_back(' ');
  append_value(out, value);
  append_timestamp(out, timestamp_ms);
}

void prom_sample(std::string* out, std::string_view name, std::string_view labels, std::string_view key,
                 std::string_view value_of_key, double value, int64_t timestamp_ms) {
  out->append(name).push_back('{');
  out->append(labels);
  if (!labels.empty()) out->push_back(',');
  out->append(key).append("=\"");
  append_escaped(out, value_of_key, true);
  out->append("\"} ");
  append_value(out, value);
  append_timestamp(out, timestamp_ms);
}

void prom_comment(std::string* out, std::string_view text) {
  out->append("# ");
  for (char c : text) out->push_back(c == '\n' ? ' ' : c);
  out->push_back('\n');
}

static bool valid_name(std::string_view n, bool colon) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool prom_valid_metric_name(std::string_view name) { return valid_name(name, true); }
bool prom_valid_label_name(std::string_view name) { return valid_name(name, false); }

}  // namespace gpuopt::gpu
