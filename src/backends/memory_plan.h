// The static memory plan: every activation of one run (one set of input shapes) gets an offset
// in one arena, assigned before the run from the graph's topological order and tensor sizes.
//
//   lifetime of a tensor  = [index of its producer, index of its last reader]   (inclusive)
//   two tensors may share bytes only when their lifetimes do not overlap
//   offsets: greedy by size (largest first), best fit into the gaps left by the tensors already
//   placed whose lifetimes overlap; sizes and offsets aligned to MemoryPlanOptions::alignment.
//
// View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity: `alias(node)`) give their output the
// storage of their input: both are one buffer whose lifetime covers every reader of either.
// Graph inputs, constants, graph outputs (and views of them), String tensors and tensors of
// unknown size stay outside the arena: the executor allocates those as before.
//
//   auto bytes = value_bytes_for_inputs(graph, {{DType::F32, {8, 3, 224, 224}}});
//   MemoryPlan plan = plan_memory(graph, bytes, {});
//   // plan.offset[v] >= 0: value v lives at arena + plan.offset[v]
//
// The executors use it per input shape (CPU backend always; CUDA with GPUOPT_MEMORY_PLAN=static)
// and check each tensor's real size against the plan: a tensor larger than planned (a shape that
// depends on data) is allocated on its own, so the plan is never a correctness risk.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/kernel_settings.h"
#include "ir/graph.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace gpuopt {

struct MemoryPlanOptions {
  size_t alignment = 256;
  // Node whose output 0 is a view of its input 0 (no kernel, no allocation). Default: is_view_op.
  std::function<bool(const Node&, size_t node_index)> alias;
  // Whether the outputs of node `node_index` may live in the arena (the CUDA executor: nodes on
  // the device). Default: every node.
  std::function<bool(const Node&, size_t node_index)> plannable;
};

struct PlannedBuffer {
  ValueId value = kNoValue;  // the producer's output (views of it share the buffer)
  size_t offset = 0;
  size_t bytes = 0;  // aligned
  int32_t first = 0, last = 0;  // node indices: produced at `first`, last read at `last`
};

struct MemoryPlan {
  size_t alignment = 256;
  size_t arena_bytes = 0;      // the one allocation the run needs for its planned activations
  size_t naive_bytes = 0;      // sum of the planned buffers' sizes: every activation its own memory
  size_t peak_live_bytes = 0;  // max over node steps of the planned bytes live at once (lower bound)
  size_t unplanned_values = 0; // activations left outside the arena (unknown size, String, outputs)
  std::vector<int64_t> offset;   // per value: offset in the arena, -1 = outside
  std::vector<int64_t> buffer;   // per value: index into `buffers`, -1 = outside
  std::vector<PlannedBuffer> buffers;
  bool in_arena(ValueId v) const { return v >= 0 && static_cast<size_t>(v) < offset.size() && offset[static_cast<size_t>(v)] >= 0; }
  // Planned bytes of value v's buffer (0 outside).
  size_t capacity(ValueId v) const {
    return in_arena(v) ? buffers[static_cast<size_t>(buffer[static_cast<size_t>(v)])].bytes : 0;
  }
};

// Reshape, Flatten, Squeeze, Unsqueeze, Identity (default domain): output 0 views input 0.
bool is_view_op(const Node& node);

// `value_bytes[v]`: bytes of value v in this run, -1 when unknown (graph.values().size() entries).
MemoryPlan plan_memory(const Graph& graph, const std::vector<int64_t>& value_bytes, const MemoryPlanOptions& options);

// Bytes of every value for one set of input dtypes/shapes (following graph.inputs()): shapes
// are inferred node by node, small shape computations (Shape, Gather, Concat, ... on known
// values, at most 4096 elements) evaluated on the CPU so that Reshape targets resolve. -1 where
// a shape depends on data (NonZero, ...).
std::vector<int64_t> value_bytes_for_inputs(const Graph& graph, const std::vector<std::pair<DType, Shape>>& inputs);

// A session's KernelSettings::memory_plan (GPUOPT_MEMORY_PLAN): "static" (the plan) or "pool"
// (each tensor allocated on its own, freed after its last reader); kDefault: `fallback`.
enum class MemoryPlanMode : uint8_t { kPool, kStatic };
MemoryPlanMode memory_plan_mode(const KernelSettings& settings, MemoryPlanMode fallback);

}  // namespace gpuopt
