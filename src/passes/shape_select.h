// Constant folding of what a graph selects from a Shape whose input has some dims unknown:
// Gather(Shape(x), i) and Slice(Shape(x), ...) give constants when every dim they pick is known.
// torch's SDPA export computes the attention scale as 1/sqrt(Shape(q)[-1]); with a dynamic batch
// the whole Shape is not constant, but its last dim is, and folding it lets the scale fold and
// the attention fusion see a constant (ViT-B/16: 36 Sqrt/Cast/Div nodes on the run path).
#pragma once

#include "ir/graph.h"

#include <map>
#include <optional>

namespace gpuopt {

// Shape outputs seen so far in a folding pass, each as the dims of its (sliced) input, with
// kUnknownDim or symbols where unknown.
class ShapeSelections {
 public:
  // Records n when it is a Shape node whose input rank is known.
  void record(const Graph& g, const Node& n);
  // The constant n computes when it is a Gather/Slice of a recorded Shape picking known dims only.
  std::optional<Tensor> fold(const Graph& g, const Node& n) const;

 private:
  std::map<ValueId, std::vector<int64_t>> dims_;
};

}  // namespace gpuopt
