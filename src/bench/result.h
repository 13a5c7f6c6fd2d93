// The data every benchmark produces, and its two plain renderings: a table for people and JSON
// for machines. SVG plots (svg.h) and the HTML page (html.h) read the same structures.
//
//   Section s = make_section("memory", "Device memory bandwidth");
//   s.results.push_back(m);               // one Measurement per (test, size)
//   fmt::print("{}", render_table(s));    // or section_to_json(s).dump(2)
#pragma once

#include "bench/counts.h"
#include "bench/stats.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace gpuopt::bench {

// GPU state right after a measurement (NVML); each field absent when unreadable ("n/a").
struct Telemetry {
  std::optional<double> sm_clock_mhz, mem_clock_mhz, temperature_c, power_w;
};

struct Measurement {
  std::string test;                 // "d2d_copy_kernel", "gemm_bf16", "launch_latency"
  std::string param;                // what varies, for people: "1.00 GiB", "n=8192", "I=1/8"
  double x = 0;                     // the same as a number, for plots: bytes, n, FLOP/byte
  WorkCount work;                   // per timed operation, from counts.h
  TimingStats seconds;              // per operation
  std::string unit;                 // "GB/s", "TFLOP/s", "TOP/s", "us", "x"
  double value = 0;                 // achieved figure in `unit`
  std::optional<double> reference;  // a ceiling to compare with, in `unit`
  std::string reference_name;       // "theoretical", "spec peak", "PyTorch anchor"
  std::string note;                 // cuBLASLt algorithm, direction, ...
  Telemetry telemetry;
};

struct Section {
  std::string name;                    // "memory", "compute", "roofline", "latency", "cpu_vs_gpu"
  std::string title;                   // one line for people
  std::vector<std::string> notes;      // conventions, device, what was skipped and why
  std::optional<std::string> skipped;  // the whole section did not run: "no CUDA device"
  std::vector<Measurement> results;
  nlohmann::json extra = nlohmann::json::object();  // roofline ceilings, crossover point, ...
};

Section make_section(std::string name, std::string title);

// Achieved/reference in percent, or nullopt without a reference.
std::optional<double> percent_of_reference(const Measurement& m);

// Numbers for people: 3 significant digits at most 2 decimals ("4231", "52.3", "0.87").
std::string format_value(double v);
std::string format_optional(const std::optional<double>& v, const char* fmt_spec = "{:.0f}");

// The table: test, parameter, time, achieved, unit, reference, %, clocks, temperature, power.
// A skipped section renders as "<title>\n  skipped: <reason>\n".
std::string render_table(const Section& s);

nlohmann::json measurement_to_json(const Measurement& m);
nlohmann::json section_to_json(const Section& s);
// Reads what section_to_json wrote (the report page can be rebuilt from saved JSON).
Section section_from_json(const nlohmann::json& j);

}  // namespace gpuopt::bench
