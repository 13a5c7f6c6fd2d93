#include "ir/op_table.h"

#include "ir/graph.h"

#include <array>
#include <unordered_map>

namespace gpuopt {
namespace {

const std::array<OpDef, kNumOps + 1>& table() {
  static const std::array<OpDef, kNumOps + 1> kTable = {{
#define GPUOPT_X(name) {Op::name, #name, &infer_##name, &cpu_##name, &flops_##name},
      GPUOPT_OPS(GPUOPT_X)
#undef GPUOPT_X
      {Op::kCount, "", nullptr, nullptr, nullptr},
  }};
  return kTable;
}

}  // namespace

const OpDef& op_def(Op op) {
  GPUOPT_ASSERT(op < Op::kCount, "op_def: bad op {}", static_cast<int>(op));
  return table()[static_cast<size_t>(op)];
}

std::string_view op_name(Op op) { return op_def(op).name; }

std::optional<Op> op_from_name(std::string_view n) {
  static const auto* kByName = [] {
    auto* m = new std::unordered_map<std::string_view, Op>();
    for (size_t i = 0; i < kNumOps; ++i) (*m)[table()[i].name] = table()[i].op;
    return m;
  }();
  auto it = kByName->find(n);
  if (it == kByName->end()) return std::nullopt;
  return it->second;
}

std::string node_label(const Node& node) {
  const std::string_view type = node.op_type.empty() ? op_name(node.op) : std::string_view(node.op_type);
  return fmt::format("[{}] node '{}'", type, node.name);
}

}  // namespace gpuopt
