#include "bench/result.h"

#include "core/table.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuopt::bench {

Section make_section(std::string name, std::string title) {
  Section s;
  s.name = std::move(name);
  s.title = std::move(title);
  return s;
}

std::optional<double> percent_of_reference(const Measurement& m) {
  if (!m.reference || *m.reference <= 0) return std::nullopt;
  return 100.0 * m.value / *m.reference;
}

std::string format_value(double v) {
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 0.01 || a == 0) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

std::string format_optional(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("n/a");
}

std::string render_table(const Section& s) {
  if (s.skipped) return fmt::format("{}\n  skipped: {}\n", s.title, *s.skipped);
  Table t({"test", "param", "time", "achieved", "unit", "reference", "%", "SM MHz", "mem MHz", "temp C", "power W"},
          s.title);
  for (const auto& m : s.results) {
    const auto pct = percent_of_reference(m);
    t.add({m.test, m.param, format_duration_us(m.seconds.median * 1e6), format_value(m.value), m.unit,
           m.reference ? format_value(*m.reference) + " " + m.reference_name : "-",
           pct ? fmt::format("{:.1f}%", *pct) : "-", format_optional(m.telemetry.sm_clock_mhz),
           format_optional(m.telemetry.mem_clock_mhz), format_optional(m.telemetry.temperature_c),
           format_optional(m.telemetry.power_w)});
  }
  std::string out = t.render();
  for (const auto& n : s.notes) out += "  " + n + "\n";
  return out;
}

namespace {
nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
std::optional<double> json_opt(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}
}  // namespace

nlohmann::json measurement_to_json(const Measurement& m) {
  const auto pct = percent_of_reference(m);
  return {{"test", m.test},
          {"param", m.param},
          {"x", m.x},
          {"flops", m.work.flops},
          {"bytes", m.work.bytes},
          {"seconds_median", m.seconds.median},
          {"seconds_min", m.seconds.min},
          {"seconds_max", m.seconds.max},
          {"repetitions", m.seconds.count},
          {"value", m.value},
          {"unit", m.unit},
          {"reference", opt_json(m.reference)},
          {"reference_name", m.reference_name},
          {"percent_of_reference", opt_json(pct)},
          {"note", m.note},
          {"telemetry",
           {{"sm_clock_mhz", opt_json(m.telemetry.sm_clock_mhz)},
            {"mem_clock_mhz", opt_json(m.telemetry.mem_clock_mhz)},
            {"temperature_c", opt_json(m.telemetry.temperature_c)},
            {"power_w", opt_json(m.telemetry.power_w)}}}};
}

nlohmann::json section_to_json(const Section& s) {
  nlohmann::json j = {{"name", s.name}, {"title", s.title}, {"notes", s.notes}};
  j["skipped"] = s.skipped ? nlohmann::json(*s.skipped) : nlohmann::json(nullptr);
  j["results"] = nlohmann::json::array();
  for (const auto& m : s.results) j["results"].push_back(measurement_to_json(m));
  j["extra"] = s.extra;
  return j;
}

Section section_from_json(const nlohmann::json& j) {
  Section s;
  s.name = j.value("name", "");
  s.title = j.value("title", "");
  if (j.contains("notes")) s.notes = j["notes"].get<std::vector<std::string>>();
  if (j.contains("skipped") && !j["skipped"].is_null()) s.skipped = j["skipped"].get<std::string>();
  if (j.contains("extra")) s.extra = j["extra"];
  for (const auto& r : j.value("results", nlohmann::json::array())) {
    Measurement m;
    m.test = r.value("test", "");
    m.param = r.value("param", "");
    m.x = r.value("x", 0.0);
    m.work = {r.value("flops", 0.0), r.value("bytes", 0.0)};
    m.seconds = {r.value("seconds_median", 0.0), r.value("seconds_min", 0.0), r.value("seconds_max", 0.0),
                 r.value("repetitions", 0)};
    m.value = r.value("value", 0.0);
    m.unit = r.value("unit", "");
    m.reference = json_opt(r, "reference");
    m.reference_name = r.value("reference_name", "");
    m.note = r.value("note", "");
    if (r.contains("telemetry")) {
      const auto& t = r["telemetry"];
      m.telemetry = {json_opt(t, "sm_clock_mhz"), json_opt(t, "mem_clock_mhz"), json_opt(t, "temperature_c"),
                     json_opt(t, "power_w")};
    }
    s.results.push_back(std::move(m));
  }
  return s;
}

}  // namespace gpuopt::bench
