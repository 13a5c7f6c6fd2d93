// config.json's quantization_config → WeightQuant. The field names and defaults are the writers':
// AutoGPTQ/GPTQModel (quant_method "gptq"), AutoAWQ ("awq") and llm-compressor
// ("compressed-tensors"). Anything whose layout the loader does not read is refused by name, so a
// checkpoint is never run with its weights misread.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "llm/config.h"

namespace gpuopt::llm {
namespace {

using nlohmann::json;

constexpr const char* kSupported = "gptq (4 or 8 bits), awq (4-bit GEMM), compressed-tensors (fp8 e4m3)";

bool present(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j.at(key).is_null();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `keys` present: an integer.
Result<int64_t> get_int(const json& j, std::initializer_list<const char*> keys, const std::string& where,
                        std::optional<int64_t> dflt) {
  for (const char* k : keys) {
    if (!present(j, k)) continue;
    if (!j.at(k).is_number_integer())
      return Status::InvalidArgument("{}: '{}' must be an integer, got {}", where, k, j.at(k).dump());
    return j.at(k).get<int64_t>();
  }
  if (dflt) return *dflt;
  return Status::InvalidArgument("{}: '{}' is missing", where, *keys.begin());
}

Result<bool> get_bool(const json& j, const char* key, const std::string& where, bool dflt) {
  if (!present(j, key)) return dflt;
  if (!j.at(key).is_boolean()) return Status::InvalidArgument("{}: '{}' must be true or false", where, key);
  return j.at(key).get<bool>();
}

std::string get_str(const json& j, const char* key, const std::string& dflt) {
  return present(j, key) && j.at(key).is_string() ? j.at(key).get<std::string>() : dflt;
}

Status check_group(int64_t g, const std::string& where) {
  if (g == -1 || (g >= 8 && g <= (int64_t{1} << 20) && g % 8 == 0)) return Status::Ok();
  return Status::InvalidArgument("{}: group_size {} must be -1 or a positive multiple of 8", where, g);
}

Result<WeightQuant> parse_gptq(const json& j, const std::string& where) {
  WeightQuant q;
  q.method = WeightQuant::Method::Gptq;
  GPUOPT_ASSIGN_OR_RETURN(int64_t bits, get_int(j, {"bits"}, where, std::nullopt));
  if (bits != 4 && bits != 8)
    return Status::Unimplemented("{}: gptq with {} bits is not supported (4 or 8)", where, bits);
  q.bits = static_cast<int>(bits);
  GPUOPT_ASSIGN_OR_RETURN(q.group_size, get_int(j, {"group_size"}, where, -1));
  GPUOPT_RETURN_IF_ERROR(check_group(q.group_size, where));
  GPUOPT_ASSIGN_OR_RETURN(q.desc_act, get_bool(j, "desc_act", where, false));
  GPUOPT_ASSIGN_OR_RETURN(q.sym, get_bool(j, "sym", where, true));
  GPUOPT_ASSIGN_OR_RETURN(bool marlin, get_bool(j, "is_marlin_format", where, false));
  const std::string fmt_name = lower(get_str(j, "checkpoint_format", "gptq"));
  if (marlin || fmt_name == "marlin")
    return Status::Unimplemented("{}: gptq checkpoint_format 'marlin' is not supported (gptq, gptq_v2)", where);
  if (fmt_name == "gptq")
    q.zero_minus_one = true;
  else if (fmt_name == "gptq_v2")
    q.zero_minus_one = false;
  else
    return Status::Unimplemented("{}: gptq checkpoint_format '{}' is not supported (gptq, gptq_v2)", where, fmt_name);
  return q;
}

Result<WeightQuant> parse_awq(const json& j, const std::string& where) {
  WeightQuant q;
  q.method = WeightQuant::Method::Awq;
  GPUOPT_ASSIGN_OR_RETURN(int64_t bits, get_int(j, {"bits", "w_bit"}, where, std::nullopt));
  if (bits != 4) return Status::Unimplemented("{}: awq with {} bits is not supported (4)", where, bits);
  q.bits = 4;
  GPUOPT_ASSIGN_OR_RETURN(q.group_size, get_int(j, {"group_size", "q_group_size"}, where, std::nullopt));
  GPUOPT_RETURN_IF_ERROR(check_group(q.group_size, where));
  GPUOPT_ASSIGN_OR_RETURN(bool zero_point, get_bool(j, "zero_point", where, true));
  if (!zero_point) return Status::Unimplemented("{}: awq with zero_point = false is not supported", where);
  q.sym = false;
  q.zero_minus_one = false;
  const std::string version = lower(get_str(j, "version", "gemm"));
  if (version != "gemm")
    return Status::Unimplemented("{}: awq version '{}' is not supported (gemm)", where, version);
  return q;
}

// One compressed-tensors quantization args object ("weights" or "input_activations"): fp8 e4m3.
Status check_fp8_args(const json& a, const std::string& where, const char* what, std::string* strategy, bool* dynamic) {
  if (!a.is_object()) return Status::InvalidArgument("{}: '{}' must be an object", where, what);
  const std::string type = lower(get_str(a, "type", "int"));
  GPUOPT_ASSIGN_OR_RETURN(int64_t bits, get_int(a, {"num_bits"}, where, 8));
  if (type != "float" || bits != 8)
    return Status::Unimplemented("{}: {} of type '{}' with {} bits are not supported (float, 8 bits: fp8 e4m3)", where,
                                 what, type, bits);
  *strategy = lower(get_str(a, "strategy", "tensor"));
  GPUOPT_ASSIGN_OR_RETURN(*dynamic, get_bool(a, "dynamic", where, false));
  GPUOPT_ASSIGN_OR_RETURN(bool sym, get_bool(a, "symmetric", where, true));
  if (!sym) return Status::Unimplemented("{}: asymmetric fp8 {} are not supported", where, what);
  return Status::Ok();
}

Result<WeightQuant> parse_compressed_tensors(const json& j, const std::string& where) {
  WeightQuant q;
  q.method = WeightQuant::Method::Fp8;
  q.bits = 8;
  const std::string format = lower(get_str(j, "format", "float-quantized"));
  if (format != "float-quantized" && format != "naive-quantized")
    return Status::Unimplemented("{}: compressed-tensors format '{}' is not supported (float-quantized fp8)", where,
                                 format);
  if (!present(j, "config_groups") || !j.at("config_groups").is_object() || j.at("config_groups").empty())
    return Status::InvalidArgument("{}: compressed-tensors needs a non-empty 'config_groups' object", where);
  bool first = true;
  for (auto it = j.at("config_groups").begin(); it != j.at("config_groups").end(); ++it) {
    const std::string w = fmt::format("{} config_groups.{}", where, it.key());
    const json& g = it.value();
    if (!present(g, "weights")) return Status::InvalidArgument("{}: 'weights' is missing", w);
    std::string ws, is;
    bool wdyn = false, idyn = false;
    GPUOPT_RETURN_IF_ERROR(check_fp8_args(g.at("weights"), w, "weights", &ws, &wdyn));
    if (ws != "tensor" && ws != "channel")
      return Status::Unimplemented("{}: fp8 weight strategy '{}' is not supported (tensor, channel)", w, ws);
    if (wdyn) return Status::Unimplemented("{}: dynamic weight quantization is not supported", w);
    const bool has_in = present(g, "input_activations");
    if (has_in) {
      GPUOPT_RETURN_IF_ERROR(check_fp8_args(g.at("input_activations"), w, "input_activations", &is, &idyn));
      if (is != "tensor" && is != "token")
        return Status::Unimplemented("{}: fp8 activation strategy '{}' is not supported (tensor, token)", w, is);
      if (!idyn && is != "tensor")
        return Status::Unimplemented("{}: static fp8 activation scales must be per tensor", w);
    }
    if (present(g, "output_activations"))
      return Status::Unimplemented("{}: output_activations quantization is not supported", w);
    const bool per_channel = ws == "channel", st = has_in && !idyn, dy = has_in && idyn;
    if (!first && (per_channel != q.fp8_per_channel || st != q.fp8_static_input || dy != q.fp8_dynamic_input))
      return Status::Unimplemented("{}: config groups with different schemes are not supported", where);
    q.fp8_per_channel = per_channel;
    q.fp8_static_input = st;
    q.fp8_dynamic_input = dy;
    first = false;
  }
  return q;
}

}  // namespace

std::string WeightQuant::describe() const {
  const std::string g = group_size < 0 ? "per-channel" : fmt::format("g{}", group_size);
  switch (method) {
    case Method::None:
      return "none";
    case Method::Gptq:
      return fmt::format("gptq int{} {}{}{}", bits, g, sym ? " sym" : " asym", desc_act ? " act-order" : "");
    case Method::Awq:
      return fmt::format("awq int{} {}", bits, g);
    case Method::Fp8:
      return fmt::format("fp8 e4m3 {}{}", fp8_per_channel ? "per-channel" : "per-tensor",
                         fp8_static_input ? ", static input scales" : fp8_dynamic_input ? ", dynamic input scales" : "");
  }
  return "none";
}

Result<WeightQuant> parse_quant_config(const std::string& json_text, const std::string& where) {
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("{}: must be an object", where);
  if (!present(j, "quant_method") || !j.at("quant_method").is_string())
    return Status::InvalidArgument("{}: 'quant_method' is missing (supported: {})", where, kSupported);
  const std::string m = lower(j.at("quant_method").get<std::string>());
  if (m == "gptq") return parse_gptq(j, where);
  if (m == "awq") return parse_awq(j, where);
  if (m == "compressed-tensors") return parse_compressed_tensors(j, where);
  return Status::Unimplemented("{}: quant_method '{}' is not supported (supported: {})", where,
                               j.at("quant_method").get<std::string>(), kSupported);
}

}  // namespace gpuopt::llm
