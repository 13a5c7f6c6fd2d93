// Bottleneck diagnosis: rules over a sliding window of samples that name what most likely holds
// a GPU back and what to do about it (the rules and thresholds are listed in docs/monitoring.md).
//
//   Diagnoser d;                       // default thresholds, 30-sample window
//   d.add(snapshot);                   // once per sample
//   for (const Finding& f : d.findings()) fmt::print("GPU {}: {} — {}\n", f.gpu, f.title, f.advice);
#pragma once

#include "monitor/sampler_types.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::gpu {

enum class Severity { kInfo = 0, kWarning = 1, kCritical = 2 };
const char* severity_name(Severity s);  // "info", "warning", "critical"

// Every rule, in the order they are reported; the id is the `rule` label of gpuopt_diagnosis.
#define GPUOPT_DIAGNOSIS_RULES(X)                                                              \
  X(kGpuLost, "gpu_lost")                                                                      \
  X(kXidErrors, "xid_errors")                                                                  \
  X(kEccErrors, "ecc_errors")                                                                  \
  X(kMemoryPressure, "memory_pressure")                                                        \
  X(kThermalThrottling, "thermal_throttling")                                                  \
  X(kPowerThrottling, "power_throttling")                                                      \
  X(kPcieBound, "pcie_bound")                                                                  \
  X(kIdleGaps, "idle_gaps")                                                                    \
  X(kLowUtilization, "low_utilization")                                                        \
  X(kMemoryBound, "memory_bound")                                                              \
  X(kComputeBound, "compute_bound")                                                            \
  X(kMemoryHeadroom, "memory_headroom")

enum class Rule {
#define GPUOPT_X(e, name) e,
  GPUOPT_DIAGNOSIS_RULES(GPUOPT_X)
#undef GPUOPT_X
};
inline constexpr size_t kRuleCount = 0
#define GPUOPT_X(e, name) +1
    GPUOPT_DIAGNOSIS_RULES(GPUOPT_X)
#undef GPUOPT_X
    ;
const char* rule_name(Rule r);

struct Finding {
  Rule rule;
  Severity severity;
  unsigned gpu;        // device index
  std::string title;   // "low GPU utilization with idle gaps"
  std::string detail;  // the numbers that triggered it
  std::string advice;  // what to do
};

// Thresholds; docs/monitoring.md repeats them, keep the two in step.
struct DiagnosisConfig {
  size_t window = 30;                  // samples kept per GPU (30 s at the default 1 s interval)
  size_t min_samples = 5;              // utilisation rules wait for this many samples
  double low_util_pct = 50;            // mean GPU utilisation below this is "low"
  double idle_sample_pct = 5;          // a sample at or below this is an idle gap
  double idle_gap_share = 0.25;        // share of idle samples that makes "idle gaps"
  double busy_sample_pct = 50;         // ... when other samples are at least this busy
  double memory_pressure = 0.90;       // used / total above this
  double memory_critical = 0.98;
  double throttle_share = 0.20;        // share of samples with a throttle reason active
  double pcie_busy_bytes_per_s = 8e9;  // TX+RX above this is "high" PCIe traffic
  double pcie_low_sm_active = 0.30;    // ... while SM activity (or util/100) is below this
  double dram_bound_active = 0.60;     // GPM DRAM activity at or above this
  double compute_bound_active = 0.50;  // GPM tensor (or FP pipe) activity at or above this
  double headroom_util_pct = 80;       // busy GPU ...
  double headroom_memory = 0.50;       // ... using less than this share of memory
};

class Diagnoser {
 public:
  explicit Diagnoser(DiagnosisConfig config = {});
  // Adds one sample for every GPU in the snapshot (GPUs are matched by position).
  void add(const Snapshot& snapshot);
  // Findings over the current window, most severe first.
  std::vector<Finding> findings() const;
  const DiagnosisConfig& config() const { return config_; }

  // The scalars a rule looks at, copied out of each sample (no processes, no strings).
  struct Point {
    bool lost = false;
    std::optional<double> util, mem_util, mem_fraction, temp, power, power_limit, sm_clock;
    std::optional<double> pcie_bytes_per_s;  // TX + RX
    std::optional<uint64_t> reasons, ecc_corr, ecc_uncorr, xid_count, last_xid;
    std::optional<double> sm_active, tensor_active, dram_active, fp_active;
    uint64_t new_xids = 0, new_ecc_corr = 0;  // increments since the previous sample
    size_t processes = 0;
  };

 private:
  struct Ring {
    std::vector<Point> points;  // capacity = window, written round-robin
    size_t next = 0, size = 0;
    std::optional<uint64_t> prev_xid_count, prev_ecc_corr;
    const Point& at(size_t i) const;  // 0 = oldest
  };
  void diagnose_gpu(unsigned gpu, const Ring& ring, std::vector<Finding>* out) const;

  DiagnosisConfig config_;
  std::vector<Ring> rings_;
  std::vector<unsigned> indices_;
};

// Text of an XID code ("79: GPU has fallen off the bus"); "XID <n>" for codes we do not know.
std::string xid_text(uint64_t xid);

}  // namespace gpuopt::gpu
