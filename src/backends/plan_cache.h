// The plan cache on disk (--cache-dir DIR, GPUOPT_CACHE_DIR): the algorithm and fusion choices a
// backend made for each shape (cuDNN algorithms and math types, cuBLASLt algorithms, the FusedConv
// fused-or-separate choice, the input shapes it captured as CUDA graphs), so that the next start
// on the same GPU skips choosing and timing them again.
//
// One file per model: DIR/<model hash>.plans, a text file
//
//   gpuopt-plan-cache 1
//   model 5f3a...            (the model file's bytes, precision and fusion switches)
//   gpu NVIDIA H200
//   driver 13000
//   cudnn 91000
//   cublas 130000
//   gpuopt 0.1.0 f5ef98b
//   entry conv <key> = <value>
//   ...
//   end <number of entries> <checksum of everything above>
//
// A file whose header names another GPU, driver, library or gpuopt build is stale, one that fails
// to parse or whose checksum does not match is corrupt: either is ignored with a warning (a cold
// start) and rewritten after the run. Entries are opaque strings to this file; the backend that
// wrote them validates them again when it uses them.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuopt {

struct PlanCacheKey {
  std::string model;   // model_hash()
  std::string gpu;     // the device's name
  std::string driver;  // versions as text
  std::string cudnn;
  std::string cublas;
  std::string gpuopt;
  bool operator==(const PlanCacheKey&) const = default;
  // (field, value) in file order.
  std::vector<std::pair<std::string, std::string>> fields() const;
};

using PlanEntries = std::map<std::string, std::string>;  // "<kind> <key>" -> value

// FNV-1a 64 over the model file's bytes and the session settings that change the compiled graph
// (precision, fusion switches), as 16 hex digits.
Result<std::string> model_hash(const std::string& model_path, std::string_view settings);
uint64_t fnv1a64(std::string_view bytes, uint64_t h = 1469598103934665603ull);

std::string serialize_plan_cache(const PlanCacheKey& key, const PlanEntries& entries);
// InvalidArgument naming the line for a malformed or truncated file or a checksum mismatch.
Result<std::pair<PlanCacheKey, PlanEntries>> parse_plan_cache(std::string_view text);

// How a start found its cache.
struct PlanCacheLoad {
  enum class State { kOff, kCold, kWarm, kStale, kCorrupt };
  State state = State::kOff;
  std::string path;
  std::string note;  // why stale or corrupt
  PlanEntries entries;
  const char* state_name() const;  // "off", "cold", "warm", "stale", "corrupt"
};

std::string plan_cache_path(const std::string& dir, const PlanCacheKey& key);
// Reads the cache of `key` from `dir`; a stale or corrupt file is logged as a warning and
// reported, never an error.
PlanCacheLoad load_plan_cache(const std::string& dir, const PlanCacheKey& key);
// Writes atomically (a temporary file renamed over the old one); creates `dir`.
Status save_plan_cache(const std::string& dir, const PlanCacheKey& key, const PlanEntries& entries);

}  // namespace gpuopt
