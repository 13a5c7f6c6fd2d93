// The monitor's screen, laid out as plain text cells (no ncurses here, so it is testable and the
// library does not link curses): a header, a panel per GPU with bars and a utilisation sparkline,
// the process table, the diagnosis lines and a key help line. src/cli/cmd_monitor.cpp draws the
// cells with ncurses. ASCII only, so it reads the same over any SSH terminal.
//
//   MonitorView view;
//   view.update(snapshot, findings);
//   Screen s = view.render(80, 24);   // s.rows[i] is exactly 80 chars
#pragma once

#include "monitor/diagnosis.h"
#include "monitor/sampler_types.h"

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::gpu {

enum class Color : uint8_t { kNormal, kHeader, kGood, kWarn, kBad, kDim };

struct Screen {
  int width = 0, height = 0;
  std::vector<std::string> rows;          // height strings of exactly width chars
  std::vector<std::vector<Color>> colors;  // per cell

  Screen(int w, int h);
  // Writes s at (row, col), clipped to the screen; out-of-range rows are ignored.
  void put(int row, int col, std::string_view s, Color c = Color::kNormal);
  std::string text() const;  // rows joined by '\n' (for tests and --once)
};

enum class ProcessSort { kMemory, kUtilization };

struct ViewOptions {
  ProcessSort sort = ProcessSort::kMemory;
  std::string title;  // header text, e.g. "host  driver 580.65  CUDA 13.0"
};

// "[||||||    ]" of `width` cells (including brackets) for a 0..1 fraction; blanks for n/a.
std::string bar(std::optional<double> fraction, int width);
// One character per value (0..100, negative = n/a) in " .:-=+*#%@", newest last, `width` wide.
std::string sparkline(const std::deque<double>& values, int width);

class MonitorView {
 public:
  static constexpr size_t kHistory = 240;
  void update(const Snapshot& s, std::vector<Finding> findings);
  Screen render(int width, int height, const ViewOptions& options) const;
  const Snapshot& snapshot() const { return snap_; }

 private:
  Snapshot snap_;
  std::vector<Finding> findings_;
  std::vector<std::deque<double>> util_history_, mem_history_;
};

// The `--once` table: one row per GPU, then processes, then diagnosis (plain text).
std::string render_once(const Snapshot& s, const std::vector<Finding>& findings, ProcessSort sort);

// Processes of all GPUs as (gpu index, process) sorted for display.
std::vector<std::pair<unsigned, const ProcessSample*>> sorted_processes(const Snapshot& s, ProcessSort sort);

}  // namespace gpuopt::gpu
