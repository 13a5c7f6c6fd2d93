// Einsum on the GPU (kernels/einsum.cu): any equation of up to 4 float operands and 12 labels,
// explicit or implicit output, repeated labels (diagonals), ellipsis with broadcasting. The plan
// is the CPU reference's (src/ops/matmul/matmul.cpp); the sums run in double.
#include "backends/cuda/cuda_ops.h"
#include "ops/matmul/cuda/einsum_plan.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace gpuopt::cuda {
namespace {

constexpr int kEllipsisBase = 1000;  // ellipsis dims get labels 1000 + position (as the reference)

struct Term {
  std::vector<int> letters;
  bool has_ellipsis = false;
  size_t ellipsis_pos = 0;
  std::vector<int> labels;  // ellipsis expanded
};

bool parse_term(const std::string& s, Term* t) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      if (t->has_ellipsis || s.compare(i, 3, "...") != 0) return false;
      t->has_ellipsis = true;
      t->ellipsis_pos = t->letters.size();
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(ch))) return false;
    t->letters.push_back(ch);
  }
  return true;
}

// Operand terms and the output term (explicit when there is an arrow).
bool parse(const std::string& eq, std::vector<Term>* ins, Term* out, bool* explicit_out) {
  if (eq.empty()) return false;
  const size_t arrow = eq.find("->");
  *explicit_out = arrow != std::string::npos;
  const std::string lhs = *explicit_out ? eq.substr(0, arrow) : eq;
  size_t start = 0;
  for (;;) {
    const size_t comma = lhs.find(',', start);
    Term t;
    if (!parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), &t)) return false;
    ins->push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return !*explicit_out || parse_term(eq.substr(arrow + 2), out);
}

// Expands the ellipsis of a term into `er` labels aligned to the right of `rank` ellipsis dims.
std::vector<int> expand(const Term& t, size_t er, size_t rank) {
  std::vector<int> l;
  for (size_t i = 0; i <= t.letters.size(); ++i) {
    if (t.has_ellipsis && i == t.ellipsis_pos)
      for (size_t j = 0; j < er; ++j) l.push_back(kEllipsisBase + static_cast<int>(rank - er + j));
    if (i < t.letters.size()) l.push_back(t.letters[i]);
  }
  return l;
}

template <typename... Args>
Status plan_error(const Node& node, fmt::format_string<Args...> f, Args&&... args) {
  return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace

Result<EinsumDesc> make_einsum_desc(const Node& node, const std::vector<Shape>& shapes) {
  std::vector<Term> ins;
  Term out;
  bool explicit_out = false;
  const std::string eq = node.attr_s("equation", "");
  if (!parse(eq, &ins, &out, &explicit_out)) return plan_error(node, "cannot parse einsum equation '{}'", eq);
  const size_t nin = ins.size();
  if (nin != shapes.size() || nin > kEinsumMaxInputs) return plan_error(node, "equation '{}' for {} inputs", eq, shapes.size());
  size_t ell_rank = 0;
  for (size_t i = 0; i < nin; ++i) {
    const size_t nl = ins[i].letters.size(), r = shapes[i].size();
    if ((!ins[i].has_ellipsis && r != nl) || r < nl) return plan_error(node, "operand {} has rank {} for term of {} labels", i, r, nl);
    ell_rank = std::max(ell_rank, r - nl);
  }
  std::map<int, int64_t> extent;
  for (size_t j = 0; j < ell_rank; ++j) extent[kEllipsisBase + static_cast<int>(j)] = 1;
  for (size_t i = 0; i < nin; ++i) {
    const size_t er = shapes[i].size() - ins[i].letters.size();
    ins[i].labels = expand(ins[i], er, ell_rank);
    for (size_t d = 0; d < ins[i].labels.size(); ++d) {
      const int l = ins[i].labels[d];
      const int64_t dim = shapes[i][d];
      auto it = extent.find(l);
      if (l >= kEllipsisBase) {  // numpy broadcasting of the ellipsis block
        if (it->second == 1) it->second = dim;
        else if (dim != 1 && dim != it->second) return plan_error(node, "ellipsis dimensions do not broadcast");
      } else if (it == extent.end()) {
        extent[l] = dim;
      } else if (it->second != dim) {
        return plan_error(node, "label '{}' has extents {} and {}", static_cast<char>(l), it->second, dim);
      }
    }
  }
  std::vector<int> order;
  if (explicit_out) {
    order = expand(out, ell_rank, ell_rank);
  } else {
    for (size_t j = 0; j < ell_rank; ++j) order.push_back(kEllipsisBase + static_cast<int>(j));
    std::map<int, int> count;
    for (const Term& t : ins)
      for (int l : t.letters) ++count[l];
    for (const auto& [l, c] : count)
      if (c == 1) order.push_back(l);
  }
  EinsumDesc d;
  d.num_inputs = static_cast<int>(nin);
  d.num_out = static_cast<int>(order.size());
  for (const auto& [l, e] : extent)
    if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  if (order.size() > static_cast<size_t>(kEinsumMaxLabels))
    return plan_error(node, "{} labels exceed the CUDA limit {}", order.size(), kEinsumMaxLabels);
  d.num_labels = static_cast<int>(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    auto it = extent.find(order[i]);
    if (it == extent.end()) return plan_error(node, "output label '{}' is not in any input", static_cast<char>(order[i]));
    d.ext[i] = it->second;
    (static_cast<int>(i) < d.num_out ? d.out_n : d.red_n) *= d.ext[i];
  }
  for (size_t kk = 0; kk < nin; ++kk) {
    const auto st = shape_strides(shapes[kk]);
    for (size_t dd = 0; dd < ins[kk].labels.size(); ++dd) {
      const size_t i = static_cast<size_t>(std::find(order.begin(), order.end(), ins[kk].labels[dd]) - order.begin());
      if (shapes[kk][dd] != 1 || d.ext[i] == 1) d.strides[kk][i] += st[dd];
    }
  }
  return d;
}

namespace {

Status run_einsum(CudaKernelContext& k) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < k.inputs.size(); ++i) shapes.push_back(k.in(i).shape());
  GPUOPT_ASSIGN_OR_RETURN(EinsumDesc d, make_einsum_desc(k.node, shapes));
  if (d.out_n != k.out(0).numel()) return k.error("einsum plan has {} outputs, the tensor {}", d.out_n, k.out(0).numel());
  EinsumInputs p;
  for (size_t i = 0; i < shapes.size(); ++i) p.p[i] = k.in(i).raw();
  return launch_einsum(k.out(0).dtype(), p, k.out(0).raw(), d, k.ctx.stream);
}

// 1-4 operands of one float dtype; the label count is checked again at run time (the ellipsis
// rank is not known here).
bool einsum_supported(const Node& n, const std::vector<DType>& in) {
  if (in.empty() || in.size() > static_cast<size_t>(kEinsumMaxInputs)) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  for (DType t : in)
    if (t != in[0]) return false;
  std::vector<Term> ins;
  Term out;
  bool explicit_out = false;
  if (!parse(n.attr_s("equation", ""), &ins, &out, &explicit_out) || ins.size() != in.size()) return false;
  std::map<int, int> letters;
  bool ellipsis = false;
  for (const Term& t : ins) {
    ellipsis = ellipsis || t.has_ellipsis;
    for (int l : t.letters) ++letters[l];
  }
  return static_cast<int>(letters.size()) + (ellipsis ? 4 : 0) <= kEinsumMaxLabels;
}

}  // namespace

GPUOPT_CUDA_OP(Einsum, &run_einsum, &einsum_supported);

}  // namespace gpuopt::cuda
