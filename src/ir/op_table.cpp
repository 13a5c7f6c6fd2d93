#include "ir/op_table.h"

#include "ir/graph.h"

#include <array>
#include <unordered_map>

namespace gpuopt {
namespace {

// Each op's versions: the older forms of ops_versions.inc in order, then the newest (infer_X,
// cpu_X) from the opset after the last older range up to the op's last opset.
std::array<OpDef, kNumOps + 1> build_table() {
  std::array<OpDef, kNumOps + 1> t{};
#define GPUOPT_X(name) t[static_cast<size_t>(Op::name)] = OpDef{Op::name, #name, &flops_##name, {}};
  GPUOPT_OPS(GPUOPT_X)
#undef GPUOPT_X
  t[kNumOps] = OpDef{Op::kCount, "", nullptr, {}};
#define GPUOPT_V(name, since, until) \
  t[static_cast<size_t>(Op::name)].versions.push_back({since, until, &infer_##name##_v##since, &cpu_##name##_v##since});
  GPUOPT_OP_VERSIONS(GPUOPT_V)
#undef GPUOPT_V
  std::array<int, kNumOps> last{};
  last.fill(kOpsetMax);
#define GPUOPT_L(name, until) last[static_cast<size_t>(Op::name)] = until;
  GPUOPT_OP_LAST(GPUOPT_L)
#undef GPUOPT_L
#define GPUOPT_X(name)                                                                                     \
  {                                                                                                        \
    auto& v = t[static_cast<size_t>(Op::name)].versions;                                                   \
    const int since = v.empty() ? 1 : v.back().until + 1;                                                  \
    v.push_back({since, last[static_cast<size_t>(Op::name)], &infer_##name, &cpu_##name});                 \
  }
  GPUOPT_OPS(GPUOPT_X)
#undef GPUOPT_X
  // The ranges of one op ascend without gaps or overlaps: a wrong line in ops_versions.inc is a
  // programmer bug, caught on first use of the table.
  for (size_t i = 0; i < kNumOps; ++i) {
    const auto& v = t[i].versions;
    GPUOPT_ASSERT(!v.empty() && v.front().since == 1, "op {}: versions must start at opset 1", t[i].name);
    for (size_t k = 0; k < v.size(); ++k) {
      GPUOPT_ASSERT(v[k].since <= v[k].until, "op {}: empty range {}-{}", t[i].name, v[k].since, v[k].until);
      if (k > 0)
        GPUOPT_ASSERT(v[k].since == v[k - 1].until + 1, "op {}: range {}-{} does not follow {}-{}", t[i].name,
                      v[k].since, v[k].until, v[k - 1].since, v[k - 1].until);
    }
  }
  return t;
}

const std::array<OpDef, kNumOps + 1>& table() {
  static const std::array<OpDef, kNumOps + 1> kTable = build_table();
  return kTable;
}

}  // namespace

const OpDef& op_def(Op op) {
  GPUOPT_ASSERT(op < Op::kCount, "op_def: bad op {}", static_cast<int>(op));
  return table()[static_cast<size_t>(op)];
}

std::string_view op_name(Op op) { return op_def(op).name; }

const OpVersion* op_version(Op op, int opset) {
  for (const OpVersion& v : op_def(op).versions)
    if (opset >= v.since && opset <= v.until) return &v;
  return nullptr;
}

std::string op_ranges(Op op) {
  std::string s;
  for (const OpVersion& v : op_def(op).versions) {
    if (!s.empty()) s += ", ";
    if (v.until == kOpsetMax) s += fmt::format("{}+", v.since);
    else if (v.since == v.until) s += fmt::format("{}", v.since);
    else s += fmt::format("{}-{}", v.since, v.until);
  }
  return s;
}

Result<const OpVersion*> node_version(const Node& node, int opset) {
  if (const OpVersion* v = op_version(node.op, opset)) return v;
  return Status::Unimplemented("{}: opset {} is outside every version gpuopt implements ({})", node_label(node), opset,
                               op_ranges(node.op));
}

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
