// Recurrent layers RNN, GRU and LSTM (ONNX spec, opsets 7-22): forward, reverse and
// bidirectional; per-batch sequence_lens (steps past a sequence's end leave the state alone and
// output 0); initial states; LSTM peepholes and input_forget; GRU linear_before_reset; clip;
// the spec's activation functions with activation_alpha/beta; layout 0 and 1. In double.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>
#include <functional>

namespace gpuopt {

namespace {

enum class Cell { kRnn, kGru, kLstm };

int gates_of(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }
size_t acts_of(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3; }

using Act = std::function<double(double)>;

Result<Act> make_act(const Node& node, const std::string& name, std::optional<double> alpha, std::optional<double> beta) {
  const double a = alpha.value_or(0), b = beta.value_or(0);
  if (name == "Sigmoid") return Act([](double x) { return 1 / (1 + std::exp(-x)); });
  if (name == "Tanh") return Act([](double x) { return std::tanh(x); });
  if (name == "Relu") return Act([](double x) { return std::max(x, 0.0); });
  if (name == "Affine") return Act([a, b](double x) { return a * x + b; });
  if (name == "LeakyRelu") { const double al = alpha.value_or(0.01); return Act([al](double x) { return x >= 0 ? x : al * x; }); }
  if (name == "ThresholdedRelu") { const double al = alpha.value_or(1.0); return Act([al](double x) { return x > al ? x : 0.0; }); }
  if (name == "ScaledTanh") return Act([a, b](double x) { return a * std::tanh(b * x); });
  if (name == "HardSigmoid") {
    const double al = alpha.value_or(0.2), be = beta.value_or(0.5);
    return Act([al, be](double x) { return std::max(0.0, std::min(1.0, al * x + be)); });
  }
  if (name == "Elu") { const double al = alpha.value_or(1.0); return Act([al](double x) { return x >= 0 ? x : al * (std::exp(x) - 1); }); }
  if (name == "Softsign") return Act([](double x) { return x / (1 + std::fabs(x)); });
  if (name == "Softplus") return Act([](double x) { return std::log1p(std::exp(x)); });
  return Status::Unimplemented("{}: activation '{}' is not supported", node_label(node), name);
}

struct RnnConfig {
  Cell cell;
  int64_t dirs = 1, hidden = 0;
  bool reverse_only = false;
  bool layout1 = false;
  double clip = 0;  // 0: none
  bool input_forget = false, linear_before_reset = false;
  std::vector<Act> acts;  // acts_of(cell) per direction
};

Result<RnnConfig> rnn_config(const Node& node, Cell cell) {
  RnnConfig c;
  c.cell = cell;
  const std::string dir = node.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return Status::InvalidArgument("{}: direction '{}' is not forward, reverse or bidirectional", node_label(node), dir);
  c.dirs = dir == "bidirectional" ? 2 : 1;
  c.reverse_only = dir == "reverse";
  c.layout1 = node.attr_i("layout", 0) != 0;
  c.hidden = node.attr_i("hidden_size", 0);
  if (node.has_attr("clip")) {
    c.clip = node.attr_f("clip", 0.0f);
    if (c.clip <= 0) return Status::InvalidArgument("{}: clip {} must be positive", node_label(node), c.clip);
  }
  c.input_forget = node.attr_i("input_forget", 0) != 0;
  c.linear_before_reset = node.attr_i("linear_before_reset", 0) != 0;
  std::vector<std::string> names;
  if (const Attribute* a = node.attr("activations")) names = a->strings;
  const size_t per = acts_of(cell);
  if (names.empty()) {
    for (int64_t d = 0; d < c.dirs; ++d) {
      if (cell == Cell::kRnn) names.push_back("Tanh");
      else if (cell == Cell::kGru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      else names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (names.size() != per * static_cast<size_t>(c.dirs))
    return Status::InvalidArgument("{}: {} activations given; expected {} per direction", node_label(node), names.size(), per);
  const std::vector<float> alphas = node.attr_floats("activation_alpha"), betas = node.attr_floats("activation_beta");
  for (size_t i = 0; i < names.size(); ++i) {
    std::optional<double> al, be;
    if (i < alphas.size()) al = alphas[i];
    if (i < betas.size()) be = betas[i];
    GPUOPT_ASSIGN_OR_RETURN(Act f, make_act(node, names[i], al, be));
    c.acts.push_back(std::move(f));
  }
  return c;
}

Status infer_rnn(InferContext& ctx, Cell cell) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 3, cell == Cell::kLstm ? 8 : 6));
  for (size_t i : {0, 1, 2, 3, 5, 6, 7})
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, "input"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 4, "sequence_lens"));
  GPUOPT_ASSIGN_OR_RETURN(RnnConfig c, rnn_config(ctx.node, cell));
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  if (x.rank_known && x.shape.size() != 3) return ctx.error("X must be rank 3, got {}", x.shape.size());
  if (w.rank_known && w.shape.size() != 3) return ctx.error("W must be rank 3, got {}", w.shape.size());
  int64_t H = c.hidden;
  if (H <= 0 && w.rank_known && w.shape[1] >= 0) H = w.shape[1] / gates_of(cell);
  if (w.rank_known && H > 0 && w.shape[1] >= 0 && w.shape[1] != gates_of(cell) * H)
    return ctx.error("W dim 1 is {}; expected {} x hidden_size {}", w.shape[1], gates_of(cell), H);
  if (w.rank_known && w.shape[0] >= 0 && w.shape[0] != c.dirs)
    return ctx.error("W has {} directions; the direction attribute says {}", w.shape[0], c.dirs);
  const int64_t hd = H > 0 ? H : kUnknownDim;
  const int64_t S = x.rank_known ? x.shape[c.layout1 ? 1 : 0] : kUnknownDim;
  const int64_t B = x.rank_known ? x.shape[c.layout1 ? 0 : 1] : kUnknownDim;
  const DType dt = x.dtype;
  if (c.layout1) {
    tensor_util::set_output(ctx, 0, dt, {B, S, c.dirs, hd});
    for (size_t i = 1; i < 3; ++i) tensor_util::set_output(ctx, i, dt, {B, c.dirs, hd});
  } else {
    tensor_util::set_output(ctx, 0, dt, {S, c.dirs, B, hd});
    for (size_t i = 1; i < 3; ++i) tensor_util::set_output(ctx, i, dt, {c.dirs, B, hd});
  }
  return Status::Ok();
}

Status run_rnn(KernelContext& ctx, Cell cell) {
  GPUOPT_ASSIGN_OR_RETURN(RnnConfig c, rnn_config(ctx.node, cell));
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor& r = ctx.in(2);
  const int64_t G = gates_of(cell), D = c.dirs, I = x.dim(2);
  const int64_t S = x.dim(c.layout1 ? 1 : 0), B = x.dim(c.layout1 ? 0 : 1);
  const int64_t H = c.hidden > 0 ? c.hidden : w.dim(1) / G;
  if (w.shape() != Shape{D, G * H, I}) return ctx.error("W {} must be [{}, {}, {}]", w.describe(), D, G * H, I);
  if (r.shape() != Shape{D, G * H, H}) return ctx.error("R {} must be [{}, {}, {}]", r.describe(), D, G * H, H);
  const std::vector<double> xv = nn::to_doubles(x), wv = nn::to_doubles(w), rv = nn::to_doubles(r);
  std::vector<double> bv(static_cast<size_t>(D * 2 * G * H), 0.0), pv(static_cast<size_t>(D * 3 * H), 0.0);
  if (ctx.has_input(3)) {
    if (ctx.in(3).shape() != Shape{D, 2 * G * H}) return ctx.error("B {} must be [{}, {}]", ctx.in(3).describe(), D, 2 * G * H);
    bv = nn::to_doubles(ctx.in(3));
  }
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (ctx.has_input(4)) {
    if (ctx.in(4).numel() != B) return ctx.error("sequence_lens has {} values for batch {}", ctx.in(4).numel(), B);
    for (int64_t b = 0; b < B; ++b) {
      lens[b] = ctx.in(4).get_i64(b);
      if (lens[b] < 0 || lens[b] > S) return ctx.error("sequence_lens[{}] = {} is outside [0, {}]", b, lens[b], S);
    }
  }
  // initial states as [D, B, H] regardless of layout
  auto init_state = [&](size_t i, const char* what) -> Result<std::vector<double>> {
    std::vector<double> s(static_cast<size_t>(D * B * H), 0.0);
    if (!ctx.has_input(i)) return s;
    const Tensor& t = ctx.in(i);
    const Shape want = c.layout1 ? Shape{B, D, H} : Shape{D, B, H};
    if (t.shape() != want) return ctx.error("{} {} must be {}", what, t.describe(), dims_string(want));
    const std::vector<double> v = nn::to_doubles(t);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) s[(d * B + b) * H + h] = c.layout1 ? v[(b * D + d) * H + h] : v[(d * B + b) * H + h];
    return s;
  };
  GPUOPT_ASSIGN_OR_RETURN(std::vector<double> hs, init_state(5, "initial_h"));
  std::vector<double> cs;
  if (cell == Cell::kLstm) {
    GPUOPT_ASSIGN_OR_RETURN(cs, init_state(6, "initial_c"));
    if (ctx.has_input(7)) {
      if (ctx.in(7).shape() != Shape{D, 3 * H}) return ctx.error("P {} must be [{}, {}]", ctx.in(7).describe(), D, 3 * H);
      pv = nn::to_doubles(ctx.in(7));
    }
  }
  const size_t per = acts_of(cell);
  std::vector<double> y(static_cast<size_t>(S * D * B * H), 0.0);  // [S, D, B, H]
  std::vector<double> gx(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H));
  auto clip = [&](double v) { return c.clip > 0 ? std::min(std::max(v, -c.clip), c.clip) : v; };
  auto xat = [&](int64_t t, int64_t b, int64_t i) { return c.layout1 ? xv[(b * S + t) * I + i] : xv[(t * B + b) * I + i]; };
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = c.reverse_only || d == 1;
    const double* W = wv.data() + d * G * H * I;
    const double* R = rv.data() + d * G * H * H;
    const double* Wb = bv.data() + d * 2 * G * H;
    const double* Rb = Wb + G * H;
    const double* P = pv.data() + d * 3 * H;
    const Act& f = c.acts[d * per];
    const Act& g = per > 1 ? c.acts[d * per + 1] : f;
    const Act& hact = per > 2 ? c.acts[d * per + 2] : f;
    for (int64_t b = 0; b < B; ++b) {
      double* Ht = hs.data() + (d * B + b) * H;
      double* Ct = cell == Cell::kLstm ? cs.data() + (d * B + b) * H : nullptr;
      for (int64_t step = 0; step < lens[b]; ++step) {
        const int64_t t = rev ? lens[b] - 1 - step : step;
        for (int64_t k = 0; k < G * H; ++k) {
          double sx = Wb[k], sh = Rb[k];
          for (int64_t i = 0; i < I; ++i) sx += W[k * I + i] * xat(t, b, i);
          for (int64_t j = 0; j < H; ++j) sh += R[k * H + j] * Ht[j];
          gx[k] = sx;
          gh[k] = sh;
        }
        std::vector<double> next(static_cast<size_t>(H));
        if (cell == Cell::kRnn) {
          for (int64_t h = 0; h < H; ++h) next[h] = f(clip(gx[h] + gh[h]));
        } else if (cell == Cell::kGru) {  // gates z, r, h
          for (int64_t h = 0; h < H; ++h) {
            const double z = f(clip(gx[h] + gh[h]));
            const double rr = f(clip(gx[H + h] + gh[H + h]));
            double pre;
            if (c.linear_before_reset) {
              pre = gx[2 * H + h] + rr * gh[2 * H + h];
            } else {
              double s = Rb[2 * H + h];
              for (int64_t j = 0; j < H; ++j) s += R[(2 * H + h) * H + j] * rr * Ht[j];
              pre = gx[2 * H + h] + s;
            }
            const double hh = g(clip(pre));
            next[h] = (1 - z) * hh + z * Ht[h];
          }
        } else {  // gates i, o, f, c; peepholes i, o, f
          for (int64_t h = 0; h < H; ++h) {
            const double ig = f(clip(gx[h] + gh[h] + P[h] * Ct[h]));
            const double fg = c.input_forget ? 1 - ig : f(clip(gx[2 * H + h] + gh[2 * H + h] + P[2 * H + h] * Ct[h]));
            const double cc = g(clip(gx[3 * H + h] + gh[3 * H + h]));
            const double cn = fg * Ct[h] + ig * cc;
            const double og = f(clip(gx[H + h] + gh[H + h] + P[H + h] * cn));
            Ct[h] = cn;
            next[h] = og * hact(cn);
          }
        }
        for (int64_t h = 0; h < H; ++h) {
          Ht[h] = next[h];
          y[((t * D + d) * B + b) * H + h] = next[h];
        }
      }
    }
  }
  // Outputs in the requested layout.
  auto want = [&](size_t i) { return i < ctx.outputs.size() && ctx.outputs[i]; };
  if (want(0)) {
    if (!c.layout1) {
      nn::from_doubles(ctx.out(0), y);
    } else {
      std::vector<double> t(y.size());
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h) t[((b * S + s) * D + d) * H + h] = y[((s * D + d) * B + b) * H + h];
      nn::from_doubles(ctx.out(0), t);
    }
  }
  auto put_state = [&](size_t i, const std::vector<double>& s) {
    if (!want(i)) return;
    if (!c.layout1) return nn::from_doubles(ctx.out(i), s);
    std::vector<double> t(s.size());
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) t[(b * D + d) * H + h] = s[(d * B + b) * H + h];
    nn::from_doubles(ctx.out(i), t);
  };
  put_state(1, hs);
  if (cell == Cell::kLstm) put_state(2, cs);
  return Status::Ok();
}

double rnn_flops(const FlopsContext& ctx, Cell cell) {
  const double y = nn::est_numel(nn::flops_out(ctx, 0));
  const ValueInfo* x = nn::flops_in(ctx, 0);
  if (y < 0 || !x) return 0;
  const double H = nn::est_dim(nn::flops_out(ctx, 0), -1);
  return y * gates_of(cell) * 2 * (nn::est_dim(x, 2) + H);
}

}  // namespace

Status infer_RNN(InferContext& ctx) { return infer_rnn(ctx, Cell::kRnn); }
Status infer_GRU(InferContext& ctx) { return infer_rnn(ctx, Cell::kGru); }
Status infer_LSTM(InferContext& ctx) { return infer_rnn(ctx, Cell::kLstm); }
Status cpu_RNN(KernelContext& ctx) { return run_rnn(ctx, Cell::kRnn); }
Status cpu_GRU(KernelContext& ctx) { return run_rnn(ctx, Cell::kGru); }
Status cpu_LSTM(KernelContext& ctx) { return run_rnn(ctx, Cell::kLstm); }
double flops_RNN(const FlopsContext& ctx) { return rnn_flops(ctx, Cell::kRnn); }
double flops_GRU(const FlopsContext& ctx) { return rnn_flops(ctx, Cell::kGru); }
double flops_LSTM(const FlopsContext& ctx) { return rnn_flops(ctx, Cell::kLstm); }

}  // namespace gpuopt
