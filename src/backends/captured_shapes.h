// The input shapes a model ran as CUDA graphs, kept in its plan cache file (backends/plan_cache.h)
// so that a warm start captures them again before the server says `ready`, and the first request
// of each shape pays no capture. One entry per shape:
//
//   entry graph <model hash> f16[32,3,224,224];i64[32,128] = captured
//
// The model hash is part of the key because a device's plan store (and so each model's file)
// holds the choices of every model on that device; a start uses only its own model's shapes.
// An entry that does not parse, or does not fit the model's inputs (count, dtype, rank, fixed
// dims), is skipped with a warning naming it.
//
//   for (const ShapeSignature& s : captured_shapes(entries, hash, &bad)) ... run s twice ...
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "backends/plan_cache.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuopt {

using ShapeSignature = std::vector<std::pair<DType, Shape>>;  // per model input: dtype, shape

constexpr std::string_view kCapturedValue = "captured";

// "f16[32,3,224,224];i64[]" (dtype_name, then the dims; a scalar has none).
std::string signature_text(const ShapeSignature& s);
// InvalidArgument naming the part that is not "<dtype>[<dims>]" with non-negative dims.
Result<ShapeSignature> parse_signature(std::string_view text);
// "graph <model hash> <signature_text>": the entry's key.
std::string captured_shape_key(std::string_view model_hash, const ShapeSignature& s);

// The shapes of `model_hash` among `entries`, in the entries' order (sorted by key). Entries of
// other models are left alone; this model's entries that do not parse, or that `declared` (the
// model's inputs; -1 or a symbolic dim = any) refuses, go to *skipped as "<key>: <reason>".
std::vector<ShapeSignature> captured_shapes(const PlanEntries& entries, std::string_view model_hash,
                                            const ShapeSignature& declared, std::vector<std::string>* skipped);

}  // namespace gpuopt
