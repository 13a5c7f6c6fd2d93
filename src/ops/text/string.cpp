// String ops: StringConcat (broadcasting), StringSplit, StringNormalizer, RegexFullMatch.
// Strings are UTF-8 byte strings; case changes and the whitespace of StringSplit are ASCII
// (non-ASCII bytes pass through unchanged), and RegexFullMatch uses std::regex's ECMAScript
// grammar, which covers the RE2 subset the node tests use (classes, \w \W \b, counted repeats,
// alternation) but not RE2-only syntax such as named groups (?P<name>...).
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

namespace gpuopt {
using namespace tensor_util;

namespace {

Status require_string(const InferContext& ctx, size_t i) {
  const DType d = ctx.in(i).dtype;
  if (d != DType::Undefined && d != DType::String)
    return ctx.error("input {} has dtype {}; expected string", i, dtype_name(d));
  return Status::Ok();
}

}  // namespace

// ---- StringConcat ---------------------------------------------------------------------------------

Status infer_StringConcat(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(require_string(ctx, 0));
  GPUOPT_RETURN_IF_ERROR(require_string(ctx, 1));
  ValueInfo out;
  GPUOPT_RETURN_IF_ERROR(infer_broadcast(ctx, {0, 1}, &out));
  out.dtype = DType::String;
  ctx.outputs[0] = out;
  return Status::Ok();
}
Status cpu_StringConcat(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  Tensor& y = ctx.out(0);
  const std::vector<int64_t> ia = broadcast_offsets(a.shape(), y.shape()), ib = broadcast_offsets(b.shape(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y.strings()[i] = a.strings()[ia[i]] + b.strings()[ib[i]];
  return Status::Ok();
}
double flops_StringConcat(const FlopsContext&) { return 0.0; }

// ---- StringSplit ----------------------------------------------------------------------------------

namespace {

// Python's str.split: with a delimiter, every occurrence splits (empty pieces kept); without
// one (absent or ""), runs of ASCII whitespace split and leading/trailing whitespace is dropped.
// maxsplit < 0 means no limit.
std::vector<std::string> py_split(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  int64_t splits = 0;
  if (!delim.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const size_t p = s.find(delim, start);
      if (p == std::string::npos) break;
      parts.push_back(s.substr(start, p - start));
      start = p + delim.size();
      ++splits;
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  auto ws = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && ws(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && splits >= maxsplit) {
      size_t e = s.size();
      while (e > i && ws(s[e - 1])) --e;
      parts.push_back(s.substr(i, e - i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !ws(s[j])) ++j;
    parts.push_back(s.substr(i, j - i));
    ++splits;
    i = j;
  }
  return parts;
}

std::vector<std::vector<std::string>> split_all(const Node& node, const Tensor& x) {
  const std::string delim = node.attr_s("delimiter", "");
  const int64_t maxsplit = node.has_attr("maxsplit") ? node.attr_i("maxsplit", -1) : -1;
  std::vector<std::vector<std::string>> all;
  for (const std::string& s : x.strings()) all.push_back(py_split(s, delim, maxsplit));
  return all;
}

}  // namespace

Status infer_StringSplit(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_RETURN_IF_ERROR(require_string(ctx, 0));
  const ValueInfo& x = ctx.in(0);
  if (!x.rank_known) {
    set_output_rank(ctx, 0, DType::String, -1);
    set_output_rank(ctx, 1, DType::I64, -1);
    return Status::Ok();
  }
  int64_t widest = kUnknownDim;
  if (x.value) {
    widest = 0;
    for (const auto& parts : split_all(ctx.node, *x.value)) widest = std::max<int64_t>(widest, static_cast<int64_t>(parts.size()));
  }
  Shape y = x.shape;
  y.push_back(widest);
  set_output(ctx, 0, DType::String, y);
  set_output(ctx, 1, DType::I64, x.shape);
  return Status::Ok();
}
// Y holds each input's pieces padded with "" to the largest count; Z the count per input.
Status cpu_StringSplit(KernelContext& ctx) {
  const auto all = split_all(ctx.node, ctx.in(0));
  Tensor& y = ctx.out(0);
  const int64_t w = y.dim(-1);
  for (size_t i = 0; i < all.size(); ++i) {
    for (int64_t j = 0; j < w; ++j)
      y.strings()[i * w + j] = j < static_cast<int64_t>(all[i].size()) ? all[i][j] : std::string();
    if (ctx.outputs.size() > 1 && ctx.outputs[1]) ctx.out(1).data<int64_t>()[i] = static_cast<int64_t>(all[i].size());
  }
  return Status::Ok();
}
double flops_StringSplit(const FlopsContext&) { return 0.0; }

// ---- StringNormalizer -----------------------------------------------------------------------------

namespace {

std::string ascii_case(std::string s, const std::string& action) {
  for (char& c : s) {
    if (action == "LOWER") c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (action == "UPPER") c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

// Drops the space-separated words of `text` that are stop words.
std::string remove_stops(const std::string& text, const std::set<std::string>& stops) {
  std::string out;
  bool first = true;
  size_t start = 0;
  while (true) {
    const size_t p = text.find(' ', start);
    const std::string w = text.substr(start, p == std::string::npos ? std::string::npos : p - start);
    if (!stops.count(w)) {
      if (!first) out += ' ';
      out += w;
      first = false;
    }
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// The reference's steps: remove stop words (exactly, when case sensitive), change case, remove
// stop words compared after the same case change (case insensitive); then, for a 1-D or [1, N]
// input, drop empty results (keeping one "" when nothing is left).
Result<std::vector<std::string>> normalize(const Node& node, const Tensor& x, Shape* out_shape) {
  const std::string action = node.attr_s("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return Status::InvalidArgument("{}: case_change_action '{}' is not NONE, LOWER or UPPER", node_label(node), action);
  if (x.rank() != 1 && x.rank() != 2)
    return Status::InvalidArgument("{}: input must be [C] or [1, C], got {}", node_label(node), x.describe());
  const bool sensitive = node.attr_i("is_case_sensitive", 0) != 0;
  std::set<std::string> raw, stops;
  if (const Attribute* a = node.attr("stopwords"))
    for (const std::string& w : a->strings) {
      raw.insert(w);
      stops.insert(ascii_case(w, action));
    }
  std::vector<std::string> v = x.strings();
  for (std::string& s : v) {
    if (sensitive && !raw.empty()) s = remove_stops(s, raw);
    s = ascii_case(s, action);
    if (!sensitive && !stops.empty()) s = remove_stops(s, stops);
  }
  *out_shape = x.shape();
  if (x.rank() == 1 || x.dim(0) == 1) {
    std::vector<std::string> kept;
    for (std::string& s : v)
      if (!s.empty()) kept.push_back(std::move(s));
    if (kept.empty()) kept.emplace_back();
    out_shape->back() = static_cast<int64_t>(kept.size());
    return kept;
  }
  return v;
}

}  // namespace

Status infer_StringNormalizer(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_RETURN_IF_ERROR(require_string(ctx, 0));
  const ValueInfo& x = ctx.in(0);
  if (x.value) {
    Shape s;
    Result<std::vector<std::string>> r = normalize(ctx.node, *x.value, &s);
    if (!r.ok()) return r.status();
    set_output(ctx, 0, DType::String, s);
    return Status::Ok();
  }
  if (x.rank_known && x.shape.size() != 1 && x.shape.size() != 2)
    return ctx.error("input must be [C] or [1, C], got rank {}", x.shape.size());
  Shape s = x.shape;
  if (!s.empty()) s.back() = kUnknownDim;
  if (x.rank_known) set_output(ctx, 0, DType::String, s);
  else set_output_rank(ctx, 0, DType::String, -1);
  return Status::Ok();
}
Status cpu_StringNormalizer(KernelContext& ctx) {
  Shape s;
  GPUOPT_ASSIGN_OR_RETURN(std::vector<std::string> v, normalize(ctx.node, ctx.in(0), &s));
  if (ctx.out(0).shape() != s) return ctx.error("output shape {} differs from the result {}", dims_string(ctx.out(0).shape()), dims_string(s));
  ctx.out(0).strings() = std::move(v);
  return Status::Ok();
}
double flops_StringNormalizer(const FlopsContext&) { return 0.0; }

// ---- RegexFullMatch -------------------------------------------------------------------------------

namespace {
Result<std::regex> compile_pattern(const Node& node) {
  if (!node.has_attr("pattern")) return Status::InvalidArgument("{}: attribute 'pattern' is required", node_label(node));
  const std::string p = node.attr_s("pattern", "");
  try {
    return std::regex(p, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::InvalidArgument("{}: pattern '{}' is not a valid regular expression: {}", node_label(node), p, e.what());
  }
}
}  // namespace

Status infer_RegexFullMatch(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_RETURN_IF_ERROR(require_string(ctx, 0));
  GPUOPT_RETURN_IF_ERROR(compile_pattern(ctx.node).status());
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known) set_output(ctx, 0, DType::Bool, x.shape);
  else set_output_rank(ctx, 0, DType::Bool, -1);
  return Status::Ok();
}
Status cpu_RegexFullMatch(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(std::regex re, compile_pattern(ctx.node));
  const Tensor& x = ctx.in(0);
  bool* y = ctx.out(0).data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = std::regex_match(x.strings()[i], re);
  return Status::Ok();
}
double flops_RegexFullMatch(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
