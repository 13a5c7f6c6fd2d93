// MatMul (batched, broadcast, 1-D operands) and Gemm (transA/B, alpha, beta, broadcast C):
// CPU reference. Float math accumulates in double and rounds once; integer math is exact
// (int64 accumulation, wrapped to the output type like a C cast). Einsum at the end.
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"
#include "ops/matmul/matmul_shapes.h"
#include "core/thread_pool.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace gpuopt {
namespace {

bool matmul_dtype_ok(DType t) {
  return nn::is_float_dtype(t) || t == DType::I32 || t == DType::I64 || t == DType::U32 || t == DType::U64;
}

// C[m,n] (+)= sum_k A[m,k] * B[k,n] over plain row-major panels with given element strides.
// Column tiles of kTileN keep the B panel in cache across the rows of A. Rows are split across
// the CPU pool (core/thread_pool.h); each C element still sums over k in order.
template <typename Acc>
void gemm_panel(const Acc* a, int64_t a_rs, int64_t a_cs, const Acc* b, int64_t b_rs, int64_t b_cs, Acc* c, int64_t M,
                int64_t N, int64_t K) {
  constexpr int64_t kTileN = 256;
  // At least ~64K multiply-adds per chunk, so small products stay on the calling thread.
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, N * K));
  parallel_for(M, min_rows, [&](int64_t m_begin, int64_t m_end) {
    for (int64_t n0 = 0; n0 < N; n0 += kTileN) {
      const int64_t n1 = std::min(N, n0 + kTileN);
      for (int64_t m = m_begin; m < m_end; ++m) {
        Acc* crow = c + m * N;
        for (int64_t k = 0; k < K; ++k) {
          const Acc av = a[m * a_rs + k * a_cs];
          const Acc* brow = b + k * b_rs;
          if (b_cs == 1)  // the common row-major case, kept separate so it vectorises
            for (int64_t n = n0; n < n1; ++n) crow[n] += av * brow[n];
          else
            for (int64_t n = n0; n < n1; ++n) crow[n] += av * brow[n * b_cs];
        }
      }
    }
  });
}

template <typename T>
std::vector<int64_t> to_int64s(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  const T* p = t.data<T>();
  if constexpr (std::is_integral_v<T>)
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(p[i]);
  return v;
}

std::vector<int64_t> int_values(const Tensor& t) {
  return dispatch_dtype(t.dtype(), [&](auto tag) { return to_int64s<decltype(tag)>(t); });
}

void store_ints(Tensor& t, const std::vector<int64_t>& v) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    if constexpr (std::is_integral_v<T>)
      for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  });
}

template <typename Acc>
void batched_matmul(const MatMulShapes& s, const std::vector<Acc>& a, const std::vector<Acc>& b, std::vector<Acc>& c) {
  const std::vector<int64_t> oa = broadcast_offsets(s.batch_a, s.batch);
  const std::vector<int64_t> ob = broadcast_offsets(s.batch_b, s.batch);
  const int64_t MK = s.M * s.K, KN = s.K * s.N, MN = s.M * s.N;
  for (size_t i = 0; i < oa.size(); ++i)
    gemm_panel<Acc>(a.data() + oa[i] * MK, s.K, 1, b.data() + ob[i] * KN, s.N, 1, c.data() + i * MN, s.M, s.N, s.K);
}

}  // namespace

// ---- MatMul ---------------------------------------------------------------------------------

Status infer_MatMul(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 1));
  const DType dt = ctx.in(0).dtype;
  if (dt != DType::Undefined && !matmul_dtype_ok(dt))
    return ctx.error("dtype {} is not supported (float, i32, i64, u32, u64)", dtype_name(dt));
  ValueInfo& y = ctx.outputs[0];
  y.dtype = dt;
  if (!ctx.in(0).rank_known || !ctx.in(1).rank_known) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(MatMulShapes s, matmul_shapes(ctx, ctx.in(0).shape, ctx.in(1).shape, false));
  y.rank_known = true;
  y.shape = matmul_out_shape(s);
  return Status::Ok();
}

Status cpu_MatMul(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(MatMulShapes s, matmul_shapes(ctx, ctx.in(0).shape(), ctx.in(1).shape(), true));
  Tensor& y = ctx.out(0);
  if (nn::is_float_dtype(y.dtype())) {
    const std::vector<double> a = nn::to_doubles(ctx.in(0)), b = nn::to_doubles(ctx.in(1));
    std::vector<double> c(static_cast<size_t>(y.numel()), 0.0);
    batched_matmul(s, a, b, c);
    nn::from_doubles(y, c);
  } else {
    const std::vector<int64_t> a = int_values(ctx.in(0)), b = int_values(ctx.in(1));
    std::vector<int64_t> c(static_cast<size_t>(y.numel()), 0);
    batched_matmul(s, a, b, c);
    store_ints(y, c);
  }
  return Status::Ok();
}

// 2*M*N*K per batch: output elements times 2K.
double flops_MatMul(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  if (out < 0) return 0;
  return 2 * out * nn::est_dim(nn::flops_in(ctx, 0), -1);
}

// ---- Gemm -----------------------------------------------------------------------------------

namespace {
template <class Ctx>
Status gemm_dims(const Ctx& ctx, const Shape& a, const Shape& b, bool concrete, int64_t* M, int64_t* K, int64_t* N) {
  if (a.size() != 2 || b.size() != 2)
    return ctx.error("A and B must be 2-D (got A {} and B {})", shape_to_string(a), shape_to_string(b));
  const bool ta = ctx.node.attr_i("transA", 0) != 0, tb = ctx.node.attr_i("transB", 0) != 0;
  *M = ta ? a[1] : a[0];
  *K = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0];
  *N = tb ? b[0] : b[1];
  if (*K != kb && (concrete || (dim_is_known(*K) && dim_is_known(kb))))
    return ctx.error("inner dimensions do not match: A {} (transA={}) has K={}, B {} (transB={}) has K={}",
                     shape_to_string(a), ta ? 1 : 0, *K, shape_to_string(b), tb ? 1 : 0, kb);
  return Status::Ok();
}
}  // namespace

Status infer_Gemm(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 1));
  if (ctx.has_input(2)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  const DType dt = ctx.in(0).dtype;
  if (dt != DType::Undefined && !matmul_dtype_ok(dt))
    return ctx.error("dtype {} is not supported (float, i32, i64, u32, u64)", dtype_name(dt));
  ValueInfo& y = ctx.outputs[0];
  y.dtype = dt;
  if (!ctx.in(0).rank_known || !ctx.in(1).rank_known) {
    y.rank_known = true;
    y.shape = {kUnknownDim, kUnknownDim};
    return Status::Ok();
  }
  int64_t M = 0, K = 0, N = 0;
  GPUOPT_RETURN_IF_ERROR(gemm_dims(ctx, ctx.in(0).shape, ctx.in(1).shape, false, &M, &K, &N));
  y.rank_known = true;
  y.shape = {M, N};
  if (ctx.has_input(2) && ctx.in(2).rank_known && !broadcastable_to(ctx.in(2).shape, y.shape))
    return ctx.error("C {} does not broadcast to the output [{},{}]", shape_to_string(ctx.in(2).shape), M, N);
  return Status::Ok();
}

Status cpu_Gemm(KernelContext& ctx) {
  const Tensor& at = ctx.in(0);
  const Tensor& bt = ctx.in(1);
  int64_t M = 0, K = 0, N = 0;
  GPUOPT_RETURN_IF_ERROR(gemm_dims(ctx, at.shape(), bt.shape(), true, &M, &K, &N));
  const bool ta = ctx.node.attr_i("transA", 0) != 0, tb = ctx.node.attr_i("transB", 0) != 0;
  const double alpha = ctx.node.attr_f("alpha", 1.0f), beta = ctx.node.attr_f("beta", 1.0f);
  const std::vector<double> a = nn::to_doubles(at), b = nn::to_doubles(bt);
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  gemm_panel<double>(a.data(), ta ? 1 : K, ta ? M : 1, b.data(), tb ? 1 : N, tb ? K : 1, c.data(), M, N, K);
  std::vector<double> cin;
  std::vector<int64_t> coff;
  if (ctx.has_input(2)) {
    if (!broadcastable_to(ctx.in(2).shape(), {M, N}))
      return ctx.error("C {} does not broadcast to the output [{},{}]", shape_to_string(ctx.in(2).shape()), M, N);
    cin = nn::to_doubles(ctx.in(2));
    coff = broadcast_offsets(ctx.in(2).shape(), {M, N});
  }
  for (int64_t i = 0; i < M * N; ++i) c[i] = alpha * c[i] + (cin.empty() ? 0.0 : beta * cin[coff[i]]);
  nn::from_doubles(ctx.out(0), c);
  return Status::Ok();
}

double flops_Gemm(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  const ValueInfo* a = nn::flops_in(ctx, 0);
  if (out < 0 || !a || !a->rank_known || a->shape.size() != 2) return 0;
  const bool ta = ctx.node.attr_i("transA", 0) != 0;
  const double K = nn::est_dim(a, ta ? 0 : 1);
  const bool has_c = ctx.inputs.size() > 2 && ctx.inputs[2];
  return out * (2 * K + (has_c ? 2 : 1));  // multiply-adds, alpha scale, beta*C add
}

// ---- Einsum ---------------------------------------------------------------------------------
// Any number of operands, explicit or implicit output, repeated labels (diagonals), ellipsis with
// broadcasting. The reference walks the full index space of all labels once (output labels outer,
// summed labels inner), so every equation costs prod(all extents).

namespace {

// Labels are letters; the ellipsis dims get labels kEllipsisBase + i (i = position from the left
// of the broadcast ellipsis block).
constexpr int kEllipsisBase = 1000;

struct Term {
  std::vector<int> labels;  // ellipsis expanded once the rank is known
  bool has_ellipsis = false;
  size_t ellipsis_pos = 0;  // index in the letters where "..." sits
  std::vector<int> letters;
};

struct Equation {
  std::vector<Term> inputs;
  bool explicit_output = false;
  Term output;
};

template <class Ctx>
Result<Term> parse_term(const Ctx& ctx, const std::string& s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      if (t.has_ellipsis || s.compare(i, 3, "...") != 0) return ctx.error("bad ellipsis in einsum term '{}'", s);
      t.has_ellipsis = true;
      t.ellipsis_pos = t.letters.size();
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(ch)))
      return ctx.error("invalid character '{}' in einsum term '{}'", ch, s);
    t.letters.push_back(ch);
  }
  return t;
}

template <class Ctx>
Result<Equation> parse_equation(const Ctx& ctx, size_t num_inputs) {
  std::string eq = ctx.node.attr_s("equation", "");
  if (eq.empty()) return ctx.error("missing 'equation' attribute");
  Equation e;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    e.explicit_output = true;
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    GPUOPT_ASSIGN_OR_RETURN(
        Term t, parse_term(ctx, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    e.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.inputs.size() != num_inputs)
    return ctx.error("equation '{}' has {} operands but the node has {} inputs", eq, e.inputs.size(), num_inputs);
  if (e.explicit_output) {
    GPUOPT_ASSIGN_OR_RETURN(e.output, parse_term(ctx, rhs));
    for (size_t i = 0; i < e.output.letters.size(); ++i) {
      const int l = e.output.letters[i];
      if (std::count(e.output.letters.begin(), e.output.letters.end(), l) > 1)
        return ctx.error("output label '{}' repeats in '{}'", static_cast<char>(l), eq);
      bool found = false;
      for (const Term& t : e.inputs) found = found || std::count(t.letters.begin(), t.letters.end(), l) > 0;
      if (!found) return ctx.error("output label '{}' does not appear in any input of '{}'", static_cast<char>(l), eq);
    }
  }
  return e;
}

// Binds every input's dims to labels; returns the label extents (kUnknownDim where unknown) and
// the output labels. Checks ranks and that equal labels have equal extents.
struct Bound {
  std::map<int, int64_t> extent;
  std::vector<int> out_labels;
  size_t ellipsis_rank = 0;
};

template <class Ctx>
Result<Bound> bind_labels(const Ctx& ctx, Equation& e, const std::vector<Shape>& shapes, bool concrete) {
  Bound b;
  std::vector<Shape> ell_shapes;
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    Term& t = e.inputs[k];
    const Shape& s = shapes[k];
    const size_t nl = t.letters.size();
    if ((!t.has_ellipsis && s.size() != nl) || (t.has_ellipsis && s.size() < nl))
      return ctx.error("operand {} has rank {} but its einsum term has {} labels{}", k, s.size(), nl,
                       t.has_ellipsis ? " plus an ellipsis" : "");
    const size_t er = t.has_ellipsis ? s.size() - nl : 0;
    ell_shapes.emplace_back(s.begin() + static_cast<int64_t>(t.ellipsis_pos),
                            s.begin() + static_cast<int64_t>(t.ellipsis_pos + er));
    b.ellipsis_rank = std::max(b.ellipsis_rank, er);
  }
  std::optional<Shape> ell = broadcast_shapes(ell_shapes);
  if (!ell) return ctx.error("ellipsis dimensions of the operands do not broadcast");
  for (size_t i = 0; i < b.ellipsis_rank; ++i) b.extent[kEllipsisBase + static_cast<int>(i)] = (*ell)[i];
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    Term& t = e.inputs[k];
    const size_t er = shapes[k].size() - t.letters.size();
    t.labels.clear();
    for (size_t i = 0; i < t.letters.size(); ++i) {
      if (t.has_ellipsis && i == t.ellipsis_pos)
        for (size_t j = 0; j < er; ++j) t.labels.push_back(kEllipsisBase + static_cast<int>(b.ellipsis_rank - er + j));
      t.labels.push_back(t.letters[i]);
    }
    if (t.has_ellipsis && t.ellipsis_pos == t.letters.size())
      for (size_t j = 0; j < er; ++j) t.labels.push_back(kEllipsisBase + static_cast<int>(b.ellipsis_rank - er + j));
    for (size_t i = 0; i < t.labels.size(); ++i) {
      const int l = t.labels[i];
      if (l >= kEllipsisBase) continue;
      const int64_t d = shapes[k][i];
      auto it = b.extent.find(l);
      if (it == b.extent.end() || !dim_is_known(it->second)) {
        if (it == b.extent.end() || dim_is_known(d)) b.extent[l] = d;
        continue;
      }
      if (it->second != d && (concrete || dim_is_known(d)))
        return ctx.error("label '{}' has extent {} in one place and {} in operand {}", static_cast<char>(l), it->second,
                         d, k);
    }
  }
  if (e.explicit_output) {
    for (size_t i = 0; i < e.output.letters.size(); ++i) {
      if (e.output.has_ellipsis && i == e.output.ellipsis_pos)
        for (size_t j = 0; j < b.ellipsis_rank; ++j) b.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
      b.out_labels.push_back(e.output.letters[i]);
    }
    if (e.output.has_ellipsis && e.output.ellipsis_pos == e.output.letters.size())
      for (size_t j = 0; j < b.ellipsis_rank; ++j) b.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
    if (!e.output.has_ellipsis && b.ellipsis_rank > 0) {
      for (size_t j = 0; j < b.ellipsis_rank; ++j)
        if (b.extent[kEllipsisBase + static_cast<int>(j)] != 1)
          return ctx.error("the output term omits the ellipsis but the ellipsis dimensions are not all 1");
    }
  } else {
    // Implicit output: broadcast dims, then labels used exactly once, in ASCII order (numpy).
    for (size_t j = 0; j < b.ellipsis_rank; ++j) b.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
    std::map<int, int> count;
    for (const Term& t : e.inputs)
      for (int l : t.letters) ++count[l];
    for (const auto& [l, c] : count)
      if (c == 1) b.out_labels.push_back(l);
  }
  return b;
}

}  // namespace

Status infer_Einsum(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input {} is missing", i);
    GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, i));
  }
  GPUOPT_ASSIGN_OR_RETURN(Equation e, parse_equation(ctx, ctx.num_inputs()));
  ValueInfo& y = ctx.outputs[0];
  y.dtype = ctx.in(0).dtype;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.in(i).rank_known) return Status::Ok();
    shapes.push_back(ctx.in(i).shape);
  }
  GPUOPT_ASSIGN_OR_RETURN(Bound b, bind_labels(ctx, e, shapes, false));
  y.rank_known = true;
  y.shape.clear();
  for (int l : b.out_labels) y.shape.push_back(b.extent[l]);
  return Status::Ok();
}

Status cpu_Einsum(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(Equation e, parse_equation(ctx, ctx.num_inputs()));
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.in(i).shape());
  GPUOPT_ASSIGN_OR_RETURN(Bound b, bind_labels(ctx, e, shapes, true));
  // Loop order: output labels, then the summed ones.
  std::vector<int> order = b.out_labels;
  for (const auto& [l, ext] : b.extent)
    if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  const size_t nl = order.size(), nin = ctx.num_inputs(), nout = b.out_labels.size();
  std::vector<int64_t> ext(nl);
  for (size_t i = 0; i < nl; ++i) ext[i] = b.extent[order[i]];
  // strides[k][i]: step of operand k's offset when label order[i] advances (0 for broadcast dims).
  std::vector<std::vector<int64_t>> strides(nin, std::vector<int64_t>(nl, 0));
  for (size_t k = 0; k < nin; ++k) {
    const std::vector<int64_t> st = shape_strides(shapes[k]);
    for (size_t d = 0; d < e.inputs[k].labels.size(); ++d) {
      const size_t i =
          static_cast<size_t>(std::find(order.begin(), order.end(), e.inputs[k].labels[d]) - order.begin());
      if (shapes[k][d] != 1 || ext[i] == 1) strides[k][i] += st[d];
    }
  }
  int64_t out_n = 1, red_n = 1;
  for (size_t i = 0; i < nl; ++i) (i < nout ? out_n : red_n) *= ext[i];
  Tensor& y = ctx.out(0);
  std::vector<std::vector<double>> fin(nin);
  for (size_t k = 0; k < nin; ++k) fin[k] = nn::to_doubles(ctx.in(k));
  std::vector<double> acc(static_cast<size_t>(out_n), 0.0);
  std::vector<int64_t> idx(nl, 0), off(nin, 0);
  // Odometer over all labels (row-major in `order`), with per-operand offsets kept incrementally.
  const int64_t total = out_n * red_n;
  for (int64_t it = 0; it < total; ++it) {
    double p = 1.0;
    for (size_t k = 0; k < nin; ++k) p *= fin[k][static_cast<size_t>(off[k])];
    acc[static_cast<size_t>(it / red_n)] += p;
    for (size_t d = nl; d-- > 0;) {
      if (++idx[d] < ext[d]) {
        for (size_t k = 0; k < nin; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < nin; ++k) off[k] -= strides[k][d] * (ext[d] - 1);
      idx[d] = 0;
    }
  }
  // Integer einsum sums in double too: exact while |values| stay below 2^53.
  nn::from_doubles(y, acc);
  return Status::Ok();
}

namespace {
// parse_equation/bind need only .node and .error from their context.
struct FlopsAdapter {
  const Node& node;
  template <typename... Args>
  Status error(fmt::format_string<Args...>, Args&&...) const {
    return Status::InvalidArgument("einsum");
  }
};
}  // namespace

// Per point of the full label index space: one multiply per extra operand and one add.
double flops_Einsum(const FlopsContext& ctx) {
  FlopsAdapter a{ctx.node};
  auto e = parse_equation(a, ctx.inputs.size());
  if (!e.ok()) return 0;
  std::vector<Shape> shapes;
  for (const ValueInfo* v : ctx.inputs) {
    if (!v || !v->rank_known) return 0;
    Shape s = v->shape;
    for (int64_t& d : s) d = dim_is_known(d) ? d : 1;  // per-sample estimate for dynamic dims
    shapes.push_back(std::move(s));
  }
  auto b = bind_labels(a, *e, shapes, false);
  if (!b.ok()) return 0;
  double points = 1;
  for (const auto& [l, ext] : b->extent) points *= static_cast<double>(std::max<int64_t>(ext, 1));
  return points * static_cast<double>(std::max<size_t>(ctx.inputs.size(), 1));
}

}  // namespace gpuopt
