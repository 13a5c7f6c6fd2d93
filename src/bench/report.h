// The headline figures against PyTorch's anchors, and `bench all --report DIR`: one JSON file,
// the SVG plots and an index.html that shows them with every table.
//
//   std::vector<Section> sections = ...;
//   GPUOPT_RETURN_IF_ERROR(write_report("out/bench", sections, device_json));
#pragma once

#include "bench/result.h"
#include "core/status.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace gpuopt::bench {

// What PyTorch 2.11 reached on the H200 this project measures on (../shared/bench/
// anchors-h200.json; median of timed repetitions with CUDA events). Applied only to devices
// whose name contains "H200".
struct Anchor {
  const char* figure;  // summary row name
  double value;
  const char* unit;
  double goal_fraction;  // the target as a fraction of the anchor (0: none)
};
const std::vector<Anchor>& h200_anchors();

struct SummaryRow {
  std::string figure;  // "D2D copy", "H2D pinned", "GEMM bf16", ...
  std::optional<double> measured;
  std::string unit;
  std::string where;  // the test and size that gave the best figure
  std::optional<double> anchor;
  std::optional<double> goal;  // absolute target in `unit`
};

// Best figure per headline across the sections (max over sizes and variants).
std::vector<SummaryRow> summarize(const std::vector<Section>& sections, const std::string& device_name);
Section summary_section(const std::vector<SummaryRow>& rows);  // as a table/JSON-able section

std::string render_summary_table(const std::vector<SummaryRow>& rows);
nlohmann::json summary_to_json(const std::vector<SummaryRow>& rows);

// The HTML page: device, summary, then per section its notes, plot (inline SVG) and table.
// `svgs` pairs a section name with the SVG text shown with it.
std::string render_html(const std::vector<Section>& sections, const std::vector<SummaryRow>& summary,
                        const nlohmann::json& device, const std::vector<std::pair<std::string, std::string>>& svgs);

// Writes DIR/bench.json, DIR/<plot>.svg (roofline.svg, bandwidth.svg, gemm.svg, cpu_vs_gpu.svg,
// for the sections present and not skipped) and DIR/index.html. Creates DIR.
Status write_report(const std::string& dir, const std::vector<Section>& sections, const nlohmann::json& device);

}  // namespace gpuopt::bench
