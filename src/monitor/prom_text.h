// Prometheus text exposition format 0.0.4 (what /metrics serves): family headers, escaped
// labels, numbers as Prometheus parses them. Appends to a caller-owned string so a renderer can
// reuse one buffer.
//
//   std::string out, labels;
//   prom_label(&labels, "gpu", "0");
//   prom_label(&labels, "modelName", "NVIDIA H200");
//   prom_family(&out, "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", PromType::kGauge);
//   prom_sample(&out, "DCGM_FI_DEV_GPU_UTIL", labels, 87);   // DCGM_FI_DEV_GPU_UTIL{gpu="0",...} 87
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuopt::gpu {

enum class PromType { kGauge, kCounter, kUntyped };

// The content type /metrics answers with.
inline constexpr const char* kPromContentType = "text/plain; version=0.0.4; charset=utf-8";

// `# HELP name help` and `# TYPE name type` (help is escaped: \\ and \n).
void prom_family(std::string* out, std::string_view name, std::string_view help, PromType type);
// Adds `key="value"` (comma-separated) to a label list; the value is escaped (\\, \", \n).
void prom_label(std::string* labels, std::string_view key, std::string_view value);
// `name{labels} value`; `{}` left out when labels is empty. Integers print exactly, NaN as NaN,
// infinities as +Inf/-Inf. timestamp_ms > 0 appends the sample's own time (ms since the epoch):
// a value read earlier than the scrape and re-exported (the sampler's slow cadence).
void prom_sample(std::string* out, std::string_view name, std::string_view labels, double value,
                 int64_t timestamp_ms = 0);
// As prom_sample with one extra label appended after `labels`.
void prom_sample(std::string* out, std::string_view name, std::string_view labels, std::string_view key,
                 std::string_view value_of_key, double value, int64_t timestamp_ms = 0);
// Appends `# text` (a comment line; newlines in text become spaces).
void prom_comment(std::string* out, std::string_view text);

// [a-zA-Z_:][a-zA-Z0-9_:]* and [a-zA-Z_][a-zA-Z0-9_]* respectively.
bool prom_valid_metric_name(std::string_view name);
bool prom_valid_label_name(std::string_view name);

}  // namespace gpuopt::gpu
