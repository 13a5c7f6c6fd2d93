// If, Loop and Scan: CPU reference. Their subgraphs (Attribute::g) run node by node on the CPU
// reference (run_graph); the outer values a subgraph reads are the node's last inputs
// (kCapturesAttr of them). Shape inference at load time gives the outputs' dtypes (and an If's
// shapes where both branches agree); at run time, with every input's value known, it runs the
// subgraph to learn the shapes, and the kernel runs it again for the values.
#include "ir/eval.h"
#include "ops/common/tensor_util.h"

#include <cstring>
#include <limits>

namespace gpuopt {
using namespace tensor_util;

namespace {

Result<const Graph*> subgraph(const Node& n, std::string_view name) {
  const Attribute* a = n.attr(name);
  if (!a || a->kind != Attribute::Kind::kGraph || !a->g)
    return Status::InvalidArgument("{}: subgraph attribute '{}' is missing", node_label(n), name);
  return a->g.get();
}

size_t num_captures(const Node& n) { return static_cast<size_t>(std::max<int64_t>(0, n.attr_i(kCapturesAttr, 0))); }

// The node's own inputs (before the captures); absent optional ones count.
template <class Ctx>
Result<size_t> own_inputs(const Ctx& ctx) {
  const size_t caps = num_captures(ctx.node);
  if (caps > ctx.num_inputs()) return ctx.error("has {} inputs but {} captured outer values", ctx.num_inputs(), caps);
  return ctx.num_inputs() - caps;
}

// Every input's value known: shape inference at run time (or all-constant at load time).
bool all_values_known(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.in(i).value) return false;
  return true;
}

std::vector<Tensor> input_values(const InferContext& ctx) {
  std::vector<Tensor> v(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) v[i] = *ctx.in(i).value;
  return v;
}
std::vector<Tensor> input_values(const KernelContext& ctx) {
  std::vector<Tensor> v(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) v[i] = ctx.in(i);
  return v;
}

// Load-time types of a subgraph's outputs: shape inference over a copy whose inputs take `ins`
// (nullptr: the subgraph's declared type); where that fails on partial information, the
// outputs' declared types.
std::vector<ValueInfo> subgraph_output_infos(const Graph& g, const std::vector<const ValueInfo*>& ins) {
  Graph copy = g;
  for (size_t i = 0; i < copy.inputs().size() && i < ins.size(); ++i) {
    Value& v = copy.value(copy.inputs()[i]);
    if (ins[i]) v.info = *ins[i];
    else v.info = v.declared;
    v.info.value = nullptr;
    v.info.dims_value.reset();
  }
  std::vector<ValueInfo> out;
  const bool inferred = copy.infer_shapes().ok();
  for (ValueId o : copy.outputs()) {
    ValueInfo vi = inferred ? copy.value(o).info : copy.value(o).declared;
    if (vi.dtype == DType::Undefined) vi = copy.value(o).declared;
    vi.value = nullptr;
    vi.dims_value.reset();
    out.push_back(std::move(vi));
  }
  return out;
}

void set_infos(InferContext& ctx, const std::vector<Tensor>& outs) {
  for (size_t i = 0; i < ctx.outputs.size() && i < outs.size(); ++i) set_output(ctx, i, outs[i].dtype(), outs[i].shape());
}

Status copy_outputs(const KernelContext& ctx, const std::vector<Tensor>& outs) {
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (!ctx.outputs[i]) continue;
    if (i >= outs.size()) return ctx.error("the subgraph gave {} outputs, the node has {}", outs.size(), ctx.outputs.size());
    if (outs[i].dtype() != ctx.out(i).dtype() || outs[i].shape() != ctx.out(i).shape())
      return ctx.error("output {} is {}, shape inference allocated {}", i, outs[i].describe(), ctx.out(i).describe());
    copy_all(outs[i], ctx.out(i));
  }
  return Status::Ok();
}

// A tensor with `stack.size()` slices of one shape stacked along a new `axis` (Loop's and Scan's
// scan outputs); `empty_shape` gives the slice shape when there are none.
Result<Tensor> stack(const Node& n, const std::vector<Tensor>& slices, int64_t axis, bool reverse, DType empty_dtype,
                     const Shape& empty_shape) {
  const Shape slice_shape = slices.empty() ? empty_shape : slices[0].shape();
  const DType dt = slices.empty() ? empty_dtype : slices[0].dtype();
  const int64_t rank = static_cast<int64_t>(slice_shape.size());
  if (axis < 0) axis += rank + 1;
  if (axis < 0 || axis > rank) return Status::InvalidArgument("{}: scan output axis out of range for rank {}", node_label(n), rank);
  if (dt == DType::String || dt == DType::Undefined)
    return Status::Unimplemented("{}: scan outputs of dtype {} are not supported", node_label(n), dtype_name(dt));
  Shape shape = slice_shape;
  const int64_t T = static_cast<int64_t>(slices.size());
  shape.insert(shape.begin() + axis, T);
  if (!shape_is_concrete(shape))
    return Status::InvalidArgument("{}: a scan output with no iterations needs a declared shape", node_label(n));
  GPUOPT_ASSIGN_OR_RETURN(Tensor out, Tensor::try_empty(dt, shape, node_label(n)));
  const size_t es = dtype_size(dt);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= slice_shape[static_cast<size_t>(d)];
  for (int64_t d = axis; d < rank; ++d) inner *= slice_shape[static_cast<size_t>(d)];
  for (int64_t t = 0; t < T; ++t) {
    const Tensor& s = slices[static_cast<size_t>(reverse ? T - 1 - t : t)];
    if (s.shape() != slice_shape || s.dtype() != dt)
      return Status::InvalidArgument("{}: scan output slices differ: {} then {}", node_label(n),
                                     slices[0].describe(), s.describe());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.data<char>() + ((o * T + t) * inner) * es, s.data<char>() + o * inner * es,
                  static_cast<size_t>(inner) * es);
  }
  return out;
}

// ---- If -------------------------------------------------------------------------------------

Result<std::vector<Tensor>> run_if(const Node& n, const std::vector<Tensor>& in) {
  if (in.empty() || !in[0].defined() || in[0].numel() != 1)
    return Status::InvalidArgument("{}: cond must be a single bool value", node_label(n));
  GPUOPT_ASSIGN_OR_RETURN(const Graph* g, subgraph(n, in[0].get_f64(0) != 0.0 ? "then_branch" : "else_branch"));
  return run_graph(*g, std::vector<Tensor>(in.begin() + 1, in.end()));
}

}  // namespace

Status infer_If(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  if (own != 1 || !ctx.has_input(0)) return ctx.error("takes one input (cond), got {}", own);
  if (ctx.in(0).dtype != DType::Undefined && ctx.in(0).dtype != DType::Bool)
    return ctx.error("cond has dtype {}; expected bool", dtype_name(ctx.in(0).dtype));
  GPUOPT_ASSIGN_OR_RETURN(const Graph* then_g, subgraph(ctx.node, "then_branch"));
  GPUOPT_ASSIGN_OR_RETURN(const Graph* else_g, subgraph(ctx.node, "else_branch"));
  for (const Graph* g : {then_g, else_g})
    if (g->outputs().size() != ctx.outputs.size() || g->inputs().size() != ctx.num_inputs() - 1)
      return ctx.error("branch '{}' has {} outputs and {} inputs; the node has {} outputs and {} captured values",
                       g->name, g->outputs().size(), g->inputs().size(), ctx.outputs.size(), ctx.num_inputs() - 1);
  if (all_values_known(ctx)) {
    GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_if(ctx.node, input_values(ctx)));
    set_infos(ctx, outs);
    return Status::Ok();
  }
  const std::vector<const ValueInfo*> caps(ctx.inputs.begin() + 1, ctx.inputs.end());
  const std::vector<ValueInfo> a = subgraph_output_infos(*then_g, caps), b = subgraph_output_infos(*else_g, caps);
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    ValueInfo& o = ctx.outputs[i];
    o.dtype = a[i].dtype != DType::Undefined ? a[i].dtype : b[i].dtype;
    if (a[i].dtype != DType::Undefined && b[i].dtype != DType::Undefined && a[i].dtype != b[i].dtype)
      return ctx.error("output {} is {} in then_branch and {} in else_branch", i, dtype_name(a[i].dtype), dtype_name(b[i].dtype));
    // The same rank in both branches: keep the dims they agree on.
    if (a[i].rank_known && b[i].rank_known && a[i].shape.size() == b[i].shape.size()) {
      o.rank_known = true;
      o.shape = a[i].shape;
      for (size_t d = 0; d < o.shape.size(); ++d)
        if (a[i].shape[d] != b[i].shape[d]) o.shape[d] = kUnknownDim;
    }
  }
  return Status::Ok();
}
Status cpu_If(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_if(ctx.node, input_values(ctx)));
  return copy_outputs(ctx, outs);
}
double flops_If(const FlopsContext&) { return 0.0; }

// ---- Loop -----------------------------------------------------------------------------------
// Inputs M (trip count, optional), cond (optional), N loop-carried values; body inputs
// (iteration, cond, N values), outputs (cond, N values, K scan outputs).

namespace {

Result<std::vector<Tensor>> run_loop(const Node& n, const std::vector<Tensor>& in, size_t own) {
  GPUOPT_ASSIGN_OR_RETURN(const Graph* body, subgraph(n, "body"));
  const size_t N = own - 2, C = in.size() - own;
  if (body->inputs().size() != 2 + N + C || body->outputs().size() < 1 + N)
    return Status::InvalidArgument("{}: body has {} inputs and {} outputs; {} loop-carried values need {} inputs and "
                                   "at least {} outputs",
                                   node_label(n), body->inputs().size(), body->outputs().size(), N, 2 + N, 1 + N);
  const size_t K = body->outputs().size() - 1 - N;
  int64_t trips = std::numeric_limits<int64_t>::max();
  if (in[0].defined()) {
    if (in[0].numel() != 1) return Status::InvalidArgument("{}: M must be a single value", node_label(n));
    trips = in[0].get_i64(0);
  }
  bool cond = true;
  if (in[1].defined()) {
    if (in[1].numel() != 1) return Status::InvalidArgument("{}: cond must be a single value", node_label(n));
    cond = in[1].get_f64(0) != 0.0;
  }
  std::vector<Tensor> carried(in.begin() + 2, in.begin() + static_cast<std::ptrdiff_t>(own));
  for (size_t i = 0; i < N; ++i)
    if (!carried[i].defined()) return Status::InvalidArgument("{}: loop-carried input {} is missing", node_label(n), i);
  std::vector<std::vector<Tensor>> scans(K);
  std::vector<Tensor> args(body->inputs().size());
  for (size_t c = 0; c < C; ++c) args[2 + N + c] = in[own + c];
  for (int64_t it = 0; it < trips && cond; ++it) {
    args[0] = Tensor::scalar_i64(it);
    args[1] = Tensor::from_vector<int>(DType::Bool, {}, {1});
    for (size_t i = 0; i < N; ++i) args[2 + i] = carried[i];
    auto outs = run_graph(*body, args);
    if (!outs.ok()) return outs.status().with_context(fmt::format("{}: iteration {}", node_label(n), it));
    cond = (*outs)[0].numel() == 1 && (*outs)[0].get_f64(0) != 0.0;
    for (size_t i = 0; i < N; ++i) carried[i] = (*outs)[1 + i];
    for (size_t k = 0; k < K; ++k) scans[k].push_back((*outs)[1 + N + k].clone());
  }
  std::vector<Tensor> result = std::move(carried);
  for (size_t k = 0; k < K; ++k) {
    const Value& decl = body->value(body->outputs()[1 + N + k]);
    GPUOPT_ASSIGN_OR_RETURN(Tensor s, stack(n, scans[k], 0, false, decl.declared.dtype, decl.declared.shape));
    result.push_back(std::move(s));
  }
  return result;
}

}  // namespace

Status infer_Loop(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  if (own < 2) return ctx.error("takes M, cond and the loop-carried values; got {} inputs", own);
  GPUOPT_ASSIGN_OR_RETURN(const Graph* body, subgraph(ctx.node, "body"));
  if (all_values_known(ctx)) {
    GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_loop(ctx.node, input_values(ctx), own));
    set_infos(ctx, outs);
    return Status::Ok();
  }
  const size_t N = own - 2;
  if (body->inputs().size() != ctx.num_inputs() || body->outputs().size() < 1 + N)
    return ctx.error("body has {} inputs and {} outputs; expected {} inputs and at least {} outputs",
                     body->inputs().size(), body->outputs().size(), ctx.num_inputs(), 1 + N);
  // The body's types from the node's: iteration i64, cond bool, the carried values as given.
  ValueInfo iter, cond;
  iter.dtype = DType::I64, iter.rank_known = true;
  cond.dtype = DType::Bool, cond.rank_known = true;
  std::vector<const ValueInfo*> ins(ctx.inputs.begin(), ctx.inputs.end());
  ins[0] = &iter;
  ins[1] = &cond;
  const std::vector<ValueInfo> body_out = subgraph_output_infos(*body, ins);
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (i < N) {
      ctx.outputs[i].dtype = ctx.has_input(2 + i) ? ctx.in(2 + i).dtype : DType::Undefined;
      // A carried value keeps its shape when the body gives it back unchanged in shape.
      const ValueInfo& b = body_out[1 + i];
      if (ctx.has_input(2 + i) && ctx.in(2 + i).rank_known && b.rank_known && b.shape == ctx.in(2 + i).shape) {
        ctx.outputs[i].rank_known = true;
        ctx.outputs[i].shape = b.shape;
      }
    } else if (1 + i < body_out.size()) {
      const ValueInfo& b = body_out[1 + i];
      ctx.outputs[i].dtype = b.dtype;
      if (b.rank_known) set_output_rank(ctx, i, b.dtype, static_cast<int64_t>(b.shape.size()) + 1);
    }
  }
  return Status::Ok();
}
Status cpu_Loop(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_loop(ctx.node, input_values(ctx), own));
  return copy_outputs(ctx, outs);
}
double flops_Loop(const FlopsContext&) { return 0.0; }

// ---- Scan (opset 9+) ------------------------------------------------------------------------
// Inputs: N initial states, then M scan inputs (num_scan_inputs); body inputs (N states, one
// slice of each scan input), outputs (N states, K scan-output slices).

namespace {

// Slice `t` of `x` along `axis` (that axis removed).
Tensor slice_at(const Tensor& x, int64_t axis, int64_t t) {
  Shape shape = x.shape();
  const int64_t T = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(x.dtype(), shape);
  const size_t es = dtype_size(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.data<char>() + o * inner * es, x.data<char>() + ((o * T + t) * inner) * es,
                static_cast<size_t>(inner) * es);
  return out;
}

// `batched_v8`: one batch item of a Scan-8 (scan axis 0, its `directions` attribute, outputs
// stacked on axis 0).
Result<std::vector<Tensor>> run_scan(const Node& n, const std::vector<Tensor>& in, size_t own, bool batched_v8 = false) {
  GPUOPT_ASSIGN_OR_RETURN(const Graph* body, subgraph(n, "body"));
  const int64_t M = n.attr_i("num_scan_inputs", -1);
  if (M < 1 || static_cast<size_t>(M) > own)
    return Status::InvalidArgument("{}: num_scan_inputs {} does not fit its {} inputs", node_label(n), M, own);
  const size_t N = own - static_cast<size_t>(M), C = in.size() - own;
  if (body->inputs().size() != own + C || body->outputs().size() < N)
    return Status::InvalidArgument("{}: body has {} inputs and {} outputs; expected {} inputs and at least {} outputs",
                                   node_label(n), body->inputs().size(), body->outputs().size(), own, N);
  const size_t K = body->outputs().size() - N;
  const std::vector<int64_t> zeros_m(static_cast<size_t>(M), 0), zeros_k(K, 0);
  const auto in_axes = batched_v8 ? zeros_m : n.attr_ints("scan_input_axes", zeros_m);
  const auto in_dirs = n.attr_ints(batched_v8 ? "directions" : "scan_input_directions", zeros_m);
  const auto out_axes = batched_v8 ? zeros_k : n.attr_ints("scan_output_axes", zeros_k);
  const auto out_dirs = batched_v8 ? zeros_k : n.attr_ints("scan_output_directions", zeros_k);
  if (in_axes.size() != static_cast<size_t>(M) || in_dirs.size() != static_cast<size_t>(M) || out_axes.size() != K ||
      out_dirs.size() != K)
    return Status::InvalidArgument("{}: scan axes/directions attributes do not match {} scan inputs and {} outputs",
                                   node_label(n), M, K);
  int64_t T = -1;
  std::vector<int64_t> axes(in_axes);
  for (size_t j = 0; j < static_cast<size_t>(M); ++j) {
    const Tensor& x = in[N + j];
    if (!x.defined()) return Status::InvalidArgument("{}: scan input {} is missing", node_label(n), j);
    if (x.dtype() == DType::String) return Status::Unimplemented("{}: string scan inputs are not supported", node_label(n));
    if (axes[j] < 0) axes[j] += x.rank();
    if (axes[j] < 0 || axes[j] >= x.rank())
      return Status::InvalidArgument("{}: scan_input_axes[{}] is out of range for rank {}", node_label(n), j, x.rank());
    const int64_t len = x.dim(axes[j]);
    if (T >= 0 && len != T)
      return Status::InvalidArgument("{}: scan inputs have {} and {} steps", node_label(n), T, len);
    T = len;
  }
  std::vector<Tensor> args(body->inputs().size());
  for (size_t i = 0; i < N; ++i) args[i] = in[i];
  for (size_t c = 0; c < C; ++c) args[own + c] = in[own + c];
  std::vector<std::vector<Tensor>> scans(K);
  for (int64_t t = 0; t < T; ++t) {
    for (size_t j = 0; j < static_cast<size_t>(M); ++j)
      args[N + j] = slice_at(in[N + j], axes[j], in_dirs[j] == 1 ? T - 1 - t : t);
    auto outs = run_graph(*body, args);
    if (!outs.ok()) return outs.status().with_context(fmt::format("{}: step {}", node_label(n), t));
    for (size_t i = 0; i < N; ++i) args[i] = (*outs)[i];
    for (size_t k = 0; k < K; ++k) scans[k].push_back((*outs)[N + k].clone());
  }
  std::vector<Tensor> result(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(N));
  for (size_t k = 0; k < K; ++k) {
    const Value& decl = body->value(body->outputs()[N + k]);
    GPUOPT_ASSIGN_OR_RETURN(Tensor s, stack(n, scans[k], out_axes[k], out_dirs[k] == 1, decl.declared.dtype,
                                            decl.declared.shape));
    result.push_back(std::move(s));
  }
  return result;
}

}  // namespace

Status infer_Scan(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  GPUOPT_ASSIGN_OR_RETURN(const Graph* body, subgraph(ctx.node, "body"));
  const int64_t M = ctx.node.attr_i("num_scan_inputs", -1);
  if (M < 1 || static_cast<size_t>(M) > own) return ctx.error("num_scan_inputs {} does not fit its {} inputs", M, own);
  if (all_values_known(ctx)) {
    GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_scan(ctx.node, input_values(ctx), own));
    set_infos(ctx, outs);
    return Status::Ok();
  }
  const size_t N = own - static_cast<size_t>(M);
  if (body->inputs().size() != ctx.num_inputs())
    return ctx.error("body has {} inputs; expected {}", body->inputs().size(), ctx.num_inputs());
  // Body inputs: the states as given, each scan input without its scan axis (rank - 1).
  std::vector<ValueInfo> slices(static_cast<size_t>(M));
  std::vector<const ValueInfo*> ins(ctx.inputs.begin(), ctx.inputs.end());
  for (size_t j = 0; j < static_cast<size_t>(M); ++j) {
    if (!ctx.has_input(N + j)) continue;
    slices[j].dtype = ctx.in(N + j).dtype;
    ins[N + j] = &slices[j];
  }
  const std::vector<ValueInfo> body_out = subgraph_output_infos(*body, ins);
  for (size_t i = 0; i < ctx.outputs.size() && i < body_out.size(); ++i) {
    if (i < N) ctx.outputs[i].dtype = ctx.has_input(i) ? ctx.in(i).dtype : body_out[i].dtype;
    else ctx.outputs[i].dtype = body_out[i].dtype;
  }
  return Status::Ok();
}
Status cpu_Scan(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_scan(ctx.node, input_values(ctx), own));
  return copy_outputs(ctx, outs);
}
double flops_Scan(const FlopsContext&) { return 0.0; }

// ---- Scan-8 -----------------------------------------------------------------------------
// Inputs: sequence_lens (optional), N states, M scan inputs, all with a leading batch axis (scan
// inputs [batch, sequence, ...]); each batch item is one opset-9 scan. Sequences shorter than
// the scan inputs' length (sequence_lens) are refused.

namespace {

Result<std::vector<Tensor>> run_scan8(const Node& n, const std::vector<Tensor>& in, size_t own) {
  if (own < 2) return Status::InvalidArgument("{}: needs states or scan inputs after sequence_lens", node_label(n));
  const Tensor& first = in[1];
  if (!first.defined() || first.rank() < 1) return Status::InvalidArgument("{}: inputs need a batch axis", node_label(n));
  const int64_t batch = first.dim(0);
  for (size_t i = 1; i < own; ++i)
    if (!in[i].defined() || in[i].rank() < 1 || in[i].dim(0) != batch)
      return Status::InvalidArgument("{}: input {} does not have the batch size {}", node_label(n), i, batch);
  if (in[0].defined()) {
    const Tensor& x = in[own - 1];  // a scan input: [batch, sequence, ...]
    for (int64_t b = 0; b < in[0].numel(); ++b)
      if (x.rank() < 2 || in[0].get_i64(b) != x.dim(1))
        return Status::Unimplemented("{}: sequence_lens shorter than the scan inputs are not supported", node_label(n));
  }
  std::vector<std::vector<Tensor>> per_output;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> sub;
    for (size_t i = 1; i < own; ++i) sub.push_back(slice_at(in[i], 0, b));
    sub.insert(sub.end(), in.begin() + static_cast<std::ptrdiff_t>(own), in.end());
    GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_scan(n, sub, own - 1, true));
    per_output.resize(outs.size());
    for (size_t k = 0; k < outs.size(); ++k) per_output[k].push_back(std::move(outs[k]));
  }
  std::vector<Tensor> result;
  for (const auto& items : per_output) {
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, stack(n, items, 0, false, DType::Undefined, {}));
    result.push_back(std::move(t));
  }
  return result;
}

}  // namespace

Status infer_Scan_v1(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  GPUOPT_RETURN_IF_ERROR(subgraph(ctx.node, "body").status());
  const int64_t M = ctx.node.attr_i("num_scan_inputs", -1);
  if (M < 1 || static_cast<size_t>(M) + 1 > own) return ctx.error("num_scan_inputs {} does not fit its {} inputs", M, own);
  if (all_values_known(ctx)) {
    GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_scan8(ctx.node, input_values(ctx), own));
    set_infos(ctx, outs);
    return Status::Ok();
  }
  // States keep their types; scan outputs' types are known when the body declares them.
  GPUOPT_ASSIGN_OR_RETURN(const Graph* body, subgraph(ctx.node, "body"));
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (i + 1 < own - static_cast<size_t>(M)) ctx.outputs[i].dtype = ctx.has_input(1 + i) ? ctx.in(1 + i).dtype : DType::Undefined;
    else if (i < body->outputs().size()) ctx.outputs[i].dtype = body->value(body->outputs()[i]).declared.dtype;
  }
  return Status::Ok();
}
Status cpu_Scan_v1(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const size_t own, own_inputs(ctx));
  GPUOPT_ASSIGN_OR_RETURN(const std::vector<Tensor> outs, run_scan8(ctx.node, input_values(ctx), own));
  return copy_outputs(ctx, outs);
}

}  // namespace gpuopt
