// The choices this process made on each CUDA device, as text entries the plan cache file holds
// (backends/plan_cache.h): cuDNN algorithm and math type per convolution shape, FusedConv's
// fused-or-separate decision, cuBLASLt's algorithm per matmul shape. A plan builder looks its
// shape up before asking cuDNN/cuBLASLt (and validates what it finds: a stale entry falls back to
// choosing again), then records what it chose. The store of the calling thread's current device
// is the one used (the executor makes its device current first).
//
//   PlanStore& s = PlanStore::current();
//   if (auto v = s.find("conv " + key)) { ... parse, validate ... }
//   s.put("conv " + key, "algo=1 math=1");
#pragma once

#include "gpuopt/session.h"
#include "backends/plan_cache.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace gpuopt::cuda {

struct ConvKey;

class PlanStore {
 public:
  static PlanStore& of(int device);
  static PlanStore& current();  // of(cudaGetDevice())

  std::optional<std::string> find(const std::string& key) const;
  void put(const std::string& key, std::string value);
  // Entries read from a cache file; what this process already chose wins.
  void merge(const PlanEntries& entries);
  PlanEntries snapshot() const;
  uint64_t version() const;  // changes on every put that changed an entry

 private:
  mutable std::mutex mu_;
  PlanEntries entries_;
  uint64_t version_ = 0;
};

// One executable's plan cache file: read when it is compiled (merged into its device's store),
// written back after a run that added or changed a choice (and once after a cold, stale or
// corrupt start). A file that cannot be written is a warning, once.
class PlanCacheLink {
 public:
  static std::unique_ptr<PlanCacheLink> open(const std::string& dir, const std::string& model_hash, int device);
  void save_if_changed();
  const PlanCacheStatus& status() const { return status_; }

 private:
  std::string dir_;
  PlanCacheKey key_;
  int device_ = 0;
  PlanCacheStatus status_;
  std::mutex mu_;
  uint64_t saved_ = 0;
  bool warned_ = false;
};

// "1,64,56,56,...,f16,nhwc": every field of a convolution's key.
std::string conv_key_text(const ConvKey& k);
// "algo=1 math=1 decomposed=0" <-> fields; a field missing from the text gives nullopt.
std::optional<int64_t> plan_field(const std::string& value, const std::string& name);

}  // namespace gpuopt::cuda
