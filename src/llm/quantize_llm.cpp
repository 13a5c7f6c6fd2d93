// A float model folder → a GPTQ / AWQ / compressed-tensors folder. Tensors stream into one
// model.safetensors (data to a temporary file as each linear is quantized, then the header and the
// data), so memory holds one layer's weights at a time, not the model.
#include "llm/quantize_llm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "core/table.h"
#include "llm/awq.h"
#include "llm/checkpoint.h"
#include "llm/quant_pack.h"
#include "llm/quantized.h"

namespace gpuopt::llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class StWriter {
 public:
  Status open(const fs::path& tmp) {
    tmp_ = tmp;
    data_.open(tmp, std::ios::binary | std::ios::trunc);
    if (!data_) return Status::InvalidArgument("'{}' cannot be written", tmp.string());
    return Status::Ok();
  }
  Status add(const std::string& name, const char* dtype, const std::vector<int64_t>& shape, const void* p,
             size_t bytes) {
    header_[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {off_, off_ + bytes}}};
    data_.write(static_cast<const char*>(p), static_cast<std::streamsize>(bytes));
    if (!data_) return Status::Internal("writing '{}' failed (disk full?)", tmp_.string());
    off_ += bytes;
    return Status::Ok();
  }
  size_t bytes() const { return off_; }
  // The header, padded with spaces to 8 bytes as the format's writers do, then the data.
  Status finish(const fs::path& out) {
    data_.close();
    header_["__metadata__"] = {{"format", "pt"}};
    std::string h = header_.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    std::ofstream o(out, std::ios::binary | std::ios::trunc);
    if (!o) return Status::InvalidArgument("'{}' cannot be written", out.string());
    uint64_t n = h.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    o.write(reinterpret_cast<const char*>(len), 8);
    o << h;
    std::ifstream in(tmp_, std::ios::binary);
    o << in.rdbuf();
    o.close();
    in.close();
    std::error_code ec;
    fs::remove(tmp_, ec);
    if (!o) return Status::Internal("writing '{}' failed (disk full?)", out.string());
    return Status::Ok();
  }

 private:
  fs::path tmp_;
  std::ofstream data_;
  json header_ = json::object();
  uint64_t off_ = 0;
};

json quant_config_json(const WeightQuant& q) {
  const json input = q.fp8_static_input
                         ? json{{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"symmetric", true},
                                {"dynamic", false}}
                         : json{{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"symmetric", true},
                                {"dynamic", true}};
  switch (q.method) {
    case WeightQuant::Method::Gptq:
      return {{"quant_method", "gptq"}, {"bits", q.bits},          {"group_size", q.group_size},
              {"desc_act", false},      {"sym", q.sym},            {"damp_percent", 0.01},
              {"true_sequential", true}, {"static_groups", false}, {"checkpoint_format", "gptq"}};
    case WeightQuant::Method::Awq:
      return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", q.group_size}, {"zero_point", true},
              {"version", "gemm"}};
    default: {
      const json weights = {{"num_bits", 8},    {"type", "float"}, {"strategy", "channel"}, {"symmetric", true},
                            {"dynamic", false}, {"group_size", nullptr}, {"observer", "minmax"}};
      return {{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"quantization_status", "compressed"},
              {"ignore", {"lm_head"}},
              {"config_groups",
               {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", input}}}}}};
    }
  }
}

template <class T>
Status put(StWriter& w, const std::string& name, const char* dtype, const std::vector<int64_t>& shape,
           const std::vector<T>& v) {
  return w.add(name, dtype, shape, v.data(), v.size() * sizeof(T));
}

// Relative Frobenius and max abs error of `got` against `want`.
void weight_error(const std::vector<float>& want, const std::vector<float>& got, LlmLayerReport* r) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
    mx = std::max(mx, std::fabs(d));
  }
  r->rel_error = den > 0 ? std::sqrt(num / den) : 0.0;
  r->max_abs_error = mx;
}

struct LayerAwq {
  AwqScale qkv, gate_up, down, o;
  bool has_o = false;  // o_proj scaled, its 1/s folded into v_proj's rows (no GQA, no v bias)
};

Status copy_side_files(const fs::path& in, const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "config.json" || name == "model.safetensors.index.json" ||
        e.path().extension() == ".safetensors" || e.path().extension() == ".bin" || e.path().extension() == ".pt")
      continue;
    fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::InvalidArgument("copying '{}' to '{}': {}", e.path().string(), out.string(), ec.message());
  }
  if (ec) return Status::InvalidArgument("'{}': {}", in.string(), ec.message());
  return Status::Ok();
}

}  // namespace

Result<LlmQuantScheme> parse_llm_quant_scheme(const std::string& s) {
  if (s == "int8") return LlmQuantScheme::Int8;
  if (s == "int4") return LlmQuantScheme::Int4;
  if (s == "awq") return LlmQuantScheme::Awq;
  if (s == "fp8") return LlmQuantScheme::Fp8;
  return Status::InvalidArgument("--scheme '{}' is not one of int8, int4, awq, fp8", s);
}

Result<LlmQuantizeReport> quantize_llm(const fs::path& in, const fs::path& out, const LlmQuantizeOptions& o) {
  GPUOPT_ASSIGN_OR_RETURN(LlmConfig cfg, load_llm_config(in));
  if (cfg.quant.method != WeightQuant::Method::None)
    return Status::InvalidArgument("'{}' is already quantized ({}); give a float model", in.string(),
                                   cfg.quant.describe());
  LlmQuantizeReport rep;
  rep.input = in.string();
  rep.output = out.string();
  WeightQuant& q = rep.quant;
  switch (o.scheme) {
    case LlmQuantScheme::Int8:
      q.method = WeightQuant::Method::Gptq;
      q.bits = 8;
      q.group_size = o.group_size ? o.group_size : -1;
      q.sym = o.sym;
      break;
    case LlmQuantScheme::Int4:
      q.method = WeightQuant::Method::Gptq;
      q.bits = 4;
      q.group_size = o.group_size ? o.group_size : 128;
      q.sym = o.sym;
      break;
    case LlmQuantScheme::Awq:
      q.method = WeightQuant::Method::Awq;
      q.bits = 4;
      q.group_size = o.group_size ? o.group_size : 128;
      q.sym = false;
      q.zero_minus_one = false;
      break;
    case LlmQuantScheme::Fp8:
      q.method = WeightQuant::Method::Fp8;
      q.bits = 8;
      q.fp8_per_channel = true;
      q.fp8_dynamic_input = true;
      break;
  }
  if (q.method != WeightQuant::Method::Fp8 && q.group_size != -1 && (q.group_size < 8 || q.group_size % 8 != 0))
    return Status::InvalidArgument("--group-size {} must be -1 or a positive multiple of 8", q.group_size);
  if (q.method == WeightQuant::Method::Awq && o.calibration.empty())
    return Status::InvalidArgument("--scheme awq needs --calibration FILE (text, one sample per line)");

  const auto expected = expected_weights(cfg);
  auto is_linear = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return shape.size() == 2 && name.rfind("model.layers.", 0) == 0;
  };
  for (const auto& [name, shape] : expected) {
    if (!is_linear(name, shape) || q.method == WeightQuant::Method::Fp8) continue;
    const int64_t N = shape[0], K = shape[1], pack = 32 / q.bits;
    if (q.group_size > 0 && K % q.group_size != 0)
      return Status::InvalidArgument("group size {} does not divide the input dimension {} of '{}'", q.group_size, K,
                                     name);
    if (N % 8 != 0 || K % pack != 0)
      return Status::InvalidArgument("'{}' [{}, {}]: packing needs the output dimension a multiple of 8", name, N, K);
  }
  GPUOPT_ASSIGN_OR_RETURN(auto ckpt, open_checkpoint(in, cfg));

  Calibration cal;
  if (!o.calibration.empty() && q.method == WeightQuant::Method::Fp8) {
    // Calibrated FP8: a static per-tensor activation scale per linear (max |x| / 448 over the
    // calibration tokens) instead of dynamic per-token scales.
    q.fp8_dynamic_input = false;
    q.fp8_static_input = true;
  }
  if (!o.calibration.empty() && (q.method == WeightQuant::Method::Awq || q.fp8_static_input)) {
    if (o.progress) o.progress("calibrating", 0, 1);
    GPUOPT_ASSIGN_OR_RETURN(cal, collect_activations(in, cfg, *ckpt, o.calibration, o.calibration_tokens));
    rep.calibration_tokens = cal.tokens;
    if (o.progress) o.progress("calibrating", 1, 1);
  }

  std::error_code ec;
  if (fs::exists(out / "config.json", ec) && fs::equivalent(in, out, ec))
    return Status::InvalidArgument("-o '{}' is the input folder", out.string());
  fs::create_directories(out, ec);
  if (ec) return Status::InvalidArgument("-o '{}' cannot be created: {}", out.string(), ec.message());
  GPUOPT_RETURN_IF_ERROR(copy_side_files(in, out));
  StWriter st;
  GPUOPT_RETURN_IF_ERROR(st.open(out / "model.safetensors.tmp"));

  auto get = [&](const std::string& n) { return weight_to_f32(*ckpt->find(n)); };
  std::map<int64_t, LayerAwq> awq;  // scales of the current layer
  auto layer_awq = [&](int64_t layer) -> LayerAwq& {
    auto it = awq.find(layer);
    if (it != awq.end()) return it->second;
    awq.clear();
    LayerAwq& a = awq[layer];
    const std::string p = fmt::format("model.layers.{}.", layer);
    const LayerActivations& act = cal.layers[static_cast<size_t>(layer)];
    const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
    const int64_t qd = cfg.num_heads * cfg.head_dim, kvd = cfg.num_kv_heads * cfg.head_dim;
    const auto wq = get(p + "self_attn.q_proj.weight"), wk = get(p + "self_attn.k_proj.weight"),
               wv = get(p + "self_attn.v_proj.weight"), wg = get(p + "mlp.gate_proj.weight"),
               wu = get(p + "mlp.up_proj.weight"), wd = get(p + "mlp.down_proj.weight");
    const int64_t T = cal.tokens;
    a.qkv = awq_search({&wq, &wk, &wv}, {qd, kvd, kvd}, H, act.x[0], T, q.group_size);
    a.gate_up = awq_search({&wg, &wu}, {I, I}, H, act.x[2], T, q.group_size);
    a.down = awq_search({&wd}, {H}, I, act.x[3], T, q.group_size);
    if (qd == kvd && !cfg.qkv_bias) {
      // AutoAWQ's condition: v_proj and o_proj of the same shape, so v's output channel j is o's
      // input channel j (no grouped-query attention); a v bias would need the 1/s too.
      const auto wo = get(p + "self_attn.o_proj.weight");
      a.o = awq_search({&wo}, {H}, qd, act.x[1], T, q.group_size);
      a.has_o = true;
    }
    return a;
  };

  size_t done = 0;
  for (const auto& [name, shape] : expected) {
    const WeightView& src = *ckpt->find(name);
    rep.bytes_in += src.bytes;
    const bool linear = is_linear(name, shape);
    int64_t layer = -1;
    if (name.rfind("model.layers.", 0) == 0) layer = std::stoll(name.substr(13));
    const bool is_awq = q.method == WeightQuant::Method::Awq && layer >= 0;
    if (!linear) {
      // Norms absorb AWQ's 1/s of the linears they feed.
      const bool ln1 = name.find("input_layernorm") != std::string::npos;
      const bool ln2 = name.find("post_attention_layernorm") != std::string::npos;
      if (is_awq && (ln1 || ln2)) {
        const LayerAwq& a = layer_awq(layer);
        std::vector<float> w = get(name);
        const auto& s = ln1 ? a.qkv.s : a.gate_up.s;
        for (size_t i = 0; i < w.size(); ++i) w[i] /= s[i];
        std::vector<unsigned char> bytes(src.bytes);
        for (size_t i = 0; i < w.size(); ++i) {
          if (src.dtype == DType::F32) {
            std::memcpy(&bytes[4 * i], &w[i], 4);
          } else {
            const uint16_t b = src.dtype == DType::F16 ? Half::from_float(w[i]) : BFloat16::from_float(w[i]);
            std::memcpy(&bytes[2 * i], &b, 2);
          }
        }
        GPUOPT_RETURN_IF_ERROR(st.add(name, src.file_dtype.c_str(), src.shape, bytes.data(), bytes.size()));
      } else {
        GPUOPT_RETURN_IF_ERROR(st.add(name, src.file_dtype.c_str(), src.shape, src.data, src.bytes));
      }
      continue;
    }
    const int64_t N = shape[0], K = shape[1];
    const std::string base = name.substr(0, name.size() - 7);
    std::vector<float> w = get(name);
    LlmLayerReport lr;
    lr.name = base;
    lr.out = N;
    lr.in = K;
    if (q.method == WeightQuant::Method::Fp8) {
      Fp8Quantized f = quantize_fp8(w.data(), N, K, true);
      weight_error(w, f.dequantized, &lr);
      GPUOPT_RETURN_IF_ERROR(put(st, name, "F8_E4M3", {N, K}, f.w));
      GPUOPT_RETURN_IF_ERROR(put(st, base + ".weight_scale", "F32", {N, 1}, f.scales));
      if (q.fp8_static_input) {
        const bool attn = name.find("self_attn.") != std::string::npos;
        const int point = attn ? (name.find("o_proj") != std::string::npos ? 1 : 0)
                               : (name.find("down_proj") != std::string::npos ? 3 : 2);
        float amax = 0;
        for (float v : cal.layers[static_cast<size_t>(layer)].x[static_cast<size_t>(point)])
          amax = std::max(amax, std::fabs(v));
        const std::vector<float> in_scale = {amax > 0 ? amax / 448.0f : 1.0f};
        GPUOPT_RETURN_IF_ERROR(put(st, base + ".input_scale", "F32", {1}, in_scale));
      }
    } else {
      // AWQ: the weight quantized is W * s (columns), and up_proj's rows also carry down's 1/s.
      std::vector<float> col(static_cast<size_t>(K), 1.0f), row(static_cast<size_t>(N), 1.0f);
      if (is_awq) {
        const LayerAwq& a = layer_awq(layer);
        const bool attn = name.find("self_attn.") != std::string::npos;
        const bool down = name.find("down_proj") != std::string::npos;
        const bool o_proj = name.find("o_proj") != std::string::npos;
        const AwqScale* sc = attn ? (o_proj ? (a.has_o ? &a.o : nullptr) : &a.qkv) : down ? &a.down : &a.gate_up;
        if (sc) {
          col = sc->s;
          lr.awq_ratio = sc->ratio;
          lr.rtn_out_error = sc->rtn_error;
          lr.awq_out_error = sc->best_error;
        }
        if (name.find("up_proj") != std::string::npos)
          for (int64_t n = 0; n < N; ++n) row[static_cast<size_t>(n)] = 1.0f / a.down.s[static_cast<size_t>(n)];
        if (a.has_o && name.find("v_proj") != std::string::npos)
          for (int64_t n = 0; n < N; ++n) row[static_cast<size_t>(n)] = 1.0f / a.o.s[static_cast<size_t>(n)];
      }
      std::vector<float> scaled(w.size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          scaled[static_cast<size_t>(n * K + k)] =
              w[static_cast<size_t>(n * K + k)] * col[static_cast<size_t>(k)] * row[static_cast<size_t>(n)];
      const IntRounding r = is_awq ? IntRounding::Awq : q.sym ? IntRounding::GptqSym : IntRounding::GptqAsym;
      IntQuantized iq = quantize_int(scaled.data(), N, K, q.bits, q.group_size, r);
      // The error against the original weight of what the model computes: dequantized / s.
      std::vector<float> eff = iq.dequantized;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          eff[static_cast<size_t>(n * K + k)] /= col[static_cast<size_t>(k)] * row[static_cast<size_t>(n)];
      if (is_awq && (name.find("up_proj") != std::string::npos || name.find("v_proj") != std::string::npos)) {
        // up's (v's) rows feed down's (o's) inputs: compare against W / s of the next linear,
        // what the folder now holds.
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) eff[static_cast<size_t>(n * K + k)] *= row[static_cast<size_t>(n)];
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) w[static_cast<size_t>(n * K + k)] *= row[static_cast<size_t>(n)];
      }
      weight_error(w, eff, &lr);
      const PackedInt p = is_awq ? pack_awq(iq) : pack_gptq(iq, true);
      GPUOPT_RETURN_IF_ERROR(put(st, base + ".qweight", "I32", p.qweight_shape, p.qweight));
      GPUOPT_RETURN_IF_ERROR(put(st, base + ".qzeros", "I32", p.qzeros_shape, p.qzeros));
      GPUOPT_RETURN_IF_ERROR(put(st, base + ".scales", "F16", {iq.groups, N}, iq.scales));
      if (!is_awq) GPUOPT_RETURN_IF_ERROR(put(st, base + ".g_idx", "I32", {K}, p.g_idx));
    }
    rep.layers.push_back(std::move(lr));
    if (o.progress) o.progress("quantizing", ++done, static_cast<size_t>(7 * cfg.num_layers));
  }
  rep.bytes_out = st.bytes();
  GPUOPT_RETURN_IF_ERROR(st.finish(out / "model.safetensors"));

  // config.json: the input's, with the quantization_config.
  std::ifstream cf(in / "config.json");
  json j = json::parse(cf, nullptr, false);
  j["quantization_config"] = quant_config_json(q);
  std::ofstream co(out / "config.json", std::ios::trunc);
  co << j.dump(2) << "\n";
  if (!co) return Status::Internal("writing '{}' failed", (out / "config.json").string());
  return rep;
}

std::string llm_quant_report_text(const LlmQuantizeReport& r) {
  const bool awq = r.quant.method == WeightQuant::Method::Awq;
  std::vector<std::string> head = {"layer", "shape", "rel err", "max abs err"};
  if (awq) head.insert(head.end(), {"awq r", "out err rtn", "out err awq"});
  Table t(head, fmt::format("{} -> {} ({})", r.input, r.output, r.quant.describe()));
  for (const LlmLayerReport& l : r.layers) {
    std::vector<std::string> row = {l.name, fmt::format("{}x{}", l.out, l.in), fmt::format("{:.3e}", l.rel_error),
                                    fmt::format("{:.3e}", l.max_abs_error)};
    if (awq) {
      if (l.awq_ratio >= 0)
        row.insert(row.end(), {fmt::format("{:.2f}", l.awq_ratio), fmt::format("{:.3e}", l.rtn_out_error),
                               fmt::format("{:.3e}", l.awq_out_error)});
      else
        row.insert(row.end(), {"-", "-", "-"});
    }
    t.add(row);
  }
  std::string s = t.render();
  s += fmt::format("weights {} -> {} ({:.2f}x smaller){}\n", format_bytes(static_cast<double>(r.bytes_in)),
                   format_bytes(static_cast<double>(r.bytes_out)),
                   r.bytes_out ? static_cast<double>(r.bytes_in) / static_cast<double>(r.bytes_out) : 0.0,
                   r.calibration_tokens ? fmt::format(", calibrated on {} tokens", r.calibration_tokens) : "");
  return s;
}

json llm_quant_report_json(const LlmQuantizeReport& r) {
  json layers = json::array();
  for (const LlmLayerReport& l : r.layers) {
    json e = {{"name", l.name}, {"shape", {l.out, l.in}}, {"rel_error", l.rel_error}, {"max_abs_error", l.max_abs_error}};
    if (l.awq_ratio >= 0) {
      e["awq_ratio"] = l.awq_ratio;
      e["rtn_out_error"] = l.rtn_out_error;
      e["awq_out_error"] = l.awq_out_error;
    }
    layers.push_back(e);
  }
  return {{"input", r.input},         {"output", r.output},          {"quantization", r.quant.describe()},
          {"bytes_in", r.bytes_in},   {"bytes_out", r.bytes_out},    {"calibration_tokens", r.calibration_tokens},
          {"layers", layers}};
}

}  // namespace gpuopt::llm
