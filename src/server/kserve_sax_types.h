// Internal to the KServe codec (kserve_sax.h): the values the streaming JSON reader hands over —
// the memory it charges, a tensor's checked name/datatype/shape, and the elements of its `data`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/kserve.h"

namespace gpuopt::server::detail {

// Bytes the decoder holds for one request, against DecodeLimits::max_memory_bytes and the
// server-wide budget when there is one.
class MemoryCharge {
 public:
  explicit MemoryCharge(const DecodeLimits& limits) : limit_(limits.max_memory_bytes), shared_(limits.inflight) {}
  ~MemoryCharge();
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  // kOutOfMemory naming the per-request limit, kUnavailable when the server-wide budget is spent.
  Status charge(size_t bytes);
  size_t used() const { return used_; }
  // Hands what was taken from the server-wide budget to the caller (back when the hold drops).
  std::shared_ptr<void> hold();

 private:
  size_t limit_;
  std::shared_ptr<net::ByteBudget> shared_;
  size_t used_ = 0;
  size_t reserved_ = 0;  // taken from shared_
};

// name, datatype and shape of one tensor object, checked (rank, non-negative dims, overflow).
struct TensorSpec {
  std::string name;
  std::string datatype;
  DType dtype = DType::Undefined;
  Shape shape;
  int64_t numel = 0;
};
Result<TensorSpec> tensor_spec(const nlohmann::json& obj);

// One JSON scalar of a tensor's `data`.
struct Scalar {
  enum Kind : uint8_t { kNull, kBool, kInt, kUint, kFloat, kString };
  Kind kind = kNull;
  uint64_t bits = 0;  // the bool, int64, uint64 or double; kString: index into TensorData::strings
};

// The elements of one tensor's `data`, as the reader left them.
struct TensorData {
  enum class Mode {
    kTyped,      // datatype and shape came first: elements are already in `tensor`
    kCompact,    // they did not: `kinds` + `bits` (+ `strings`), converted by finish_data
    kCountOnly,  // the shape needs more elements than the body could hold: only counted
  };
  Mode mode = Mode::kCompact;
  int64_t count = 0;  // elements seen
  Tensor tensor;
  std::vector<uint8_t> kinds;
  std::vector<uint64_t> bits;
  std::vector<std::string> strings;
};

}  // namespace gpuopt::server::detail
