// KernelSettings (include/gpuopt/kernel_settings.h): one table of every setting, its variable's
// name and its allowed texts; from_env, set, get and key all walk it.
#include "gpuopt/kernel_settings.h"

#include "core/env.h"
#include "passes/passes.h"

#include <fmt/format.h>

#include <charconv>
#include <type_traits>
#include <utility>

namespace gpuopt {
namespace {

// One setting whose value is an index into `values` (the texts the variable takes). A setting
// with no fixed texts (a number, a list) has `parse`/`print` instead.
struct Field {
  std::string_view name;
  std::vector<std::string_view> values;  // "" entries: a state no text selects (MemoryPlan::kDefault)
  int (*get)(const KernelSettings&) = nullptr;
  void (*set)(KernelSettings&, int) = nullptr;
  Status (*parse)(KernelSettings&, std::string_view) = nullptr;
  std::string (*print)(const KernelSettings&) = nullptr;
};

template <auto M>
Field indexed(std::string_view name, std::vector<std::string_view> values) {
  using T = std::remove_reference_t<decltype(std::declval<KernelSettings&>().*M)>;
  Field f{name, std::move(values)};
  f.get = [](const KernelSettings& s) { return static_cast<int>(s.*M); };
  f.set = [](KernelSettings& s, int i) { s.*M = static_cast<T>(i); };
  return f;
}

Status parse_candidates(KernelSettings& s, std::string_view v) {
  int x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 1 || x > KernelSettings::kMaxMatmulCandidates)
    return Status::InvalidArgument("GPUOPT_MATMUL_CANDIDATES='{}': expected a number from 1 to {}", v,
                                   KernelSettings::kMaxMatmulCandidates);
  s.matmul_candidates = x;
  return Status::Ok();
}

Status parse_fusion(KernelSettings& s, std::string_view v) {
  GPUOPT_RETURN_IF_ERROR(FusionSwitches::parse(v).validate());
  s.disable_fusion = std::string(v);
  return Status::Ok();
}

const std::vector<Field>& fields() {
  using K = KernelSettings;
  static const std::vector<Field> kFields = [] {
    std::vector<Field> f;
    f.push_back(indexed<&K::sdpa_bias>("GPUOPT_SDPA_BIAS", {"expand", "broadcast", "copy"}));
    f.push_back(indexed<&K::sdpa_autotune>("GPUOPT_SDPA_AUTOTUNE", {"0", "1"}));
    f.push_back(indexed<&K::sdpa_nan_guard>("GPUOPT_SDPA_NAN_GUARD", {"cudnn", "pass"}));
    Field warps{"GPUOPT_FA_WARPS", {"auto", "4", "8"}};
    warps.get = [](const K& s) { return s.fa_warps == 0 ? 0 : s.fa_warps == 4 ? 1 : 2; };
    warps.set = [](K& s, int i) { s.fa_warps = i == 0 ? 0 : i == 1 ? 4 : 8; };
    f.push_back(std::move(warps));
    f.push_back(indexed<&K::attention_kernel>("GPUOPT_ATTENTION_KERNEL", {"auto", "cudnn", "fa", "wmma", "scalar"}));
    f.push_back(indexed<&K::int8_conv_autotune>("GPUOPT_INT8_CONV_AUTOTUNE", {"0", "1"}));
    f.push_back(indexed<&K::int8_conv1x1>("GPUOPT_INT8_CONV1X1", {"0", "1"}));
    f.push_back(indexed<&K::conv_engine>("GPUOPT_CONV_ENGINE", {"legacy", "graph"}));
    f.push_back(indexed<&K::conv_gemm>("GPUOPT_CONV_GEMM", {"0", "1", "force"}));
    f.push_back(indexed<&K::depthwise>("GPUOPT_DEPTHWISE_KERNEL",
                                       {"auto", "smem", "tiles", "narrow", "wide", "wide1", "cudnn"}));
    f.push_back(indexed<&K::pool_kernel>("GPUOPT_POOL_KERNEL", {"ours", "cudnn"}));
    f.push_back(indexed<&K::small_c_transpose>("GPUOPT_SMALL_C_TRANSPOSE", {"0", "1"}));
    Field cands{"GPUOPT_MATMUL_CANDIDATES", {}};
    cands.parse = &parse_candidates;
    cands.print = [](const K& s) { return std::to_string(s.matmul_candidates); };
    f.push_back(std::move(cands));
    f.push_back(indexed<&K::matmul_autotune>("GPUOPT_MATMUL_AUTOTUNE", {"0", "1"}));
    f.push_back(indexed<&K::fp8_fast_accum>("GPUOPT_FP8_FAST_ACCUM", {"0", "1"}));
    f.push_back(indexed<&K::fp8_e4m3_out>("GPUOPT_FP8_E4M3_OUT", {"auto", "bf16", "staged"}));
    Field fusion{"GPUOPT_DISABLE_FUSION", {}};
    fusion.parse = &parse_fusion;
    fusion.print = [](const K& s) { return s.disable_fusion; };
    f.push_back(std::move(fusion));
    f.push_back(indexed<&K::int8_conv>("GPUOPT_INT8_CONV", {"0", "1"}));
    f.push_back(indexed<&K::memory_plan>("GPUOPT_MEMORY_PLAN", {"", "static", "pool"}));
    return f;
  }();
  return kFields;
}

const Field* find(std::string_view name) {
  for (const Field& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

// "a, b or c" over the texts a variable takes.
std::string allowed(const Field& f) {
  std::vector<std::string_view> v;
  for (std::string_view s : f.values)
    if (!s.empty()) v.push_back(s);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{}", i == 0 ? "" : i + 1 == v.size() ? " or " : ", ", v[i]);
  return out;
}

}  // namespace

Status KernelSettings::set(std::string_view name, std::string_view value) {
  const Field* f = find(name);
  if (!f) {
    std::string all;
    for (const Field& g : fields()) all += fmt::format("{}{}", all.empty() ? "" : ", ", g.name);
    return Status::InvalidArgument("'{}' is not a kernel setting (the settings: {})", name, all);
  }
  if (f->parse) return f->parse(*this, value);
  for (size_t i = 0; i < f->values.size(); ++i)
    if (!f->values[i].empty() && f->values[i] == value) {
      f->set(*this, static_cast<int>(i));
      return Status::Ok();
    }
  return Status::InvalidArgument("{}='{}': expected {}", name, value, allowed(*f));
}

std::string KernelSettings::get(std::string_view name) const {
  const Field* f = find(name);
  if (!f) return "";
  if (f->print) return f->print(*this);
  return std::string(f->values[static_cast<size_t>(f->get(*this))]);
}

const std::vector<std::string_view>& KernelSettings::names() {
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> n;
    for (const Field& f : fields()) n.push_back(f.name);
    return n;
  }();
  return kNames;
}

Result<KernelSettings> KernelSettings::from_env() {
  KernelSettings s;
  for (const Field& f : fields()) {
    const std::string name(f.name);
    if (const auto v = env_get(name.c_str())) GPUOPT_RETURN_IF_ERROR(s.set(f.name, *v));
  }
  return s;
}

Result<KernelSettings> KernelSettings::or_env(const std::optional<KernelSettings>& given) {
  if (given) return *given;
  return from_env();
}

std::string KernelSettings::key() const {
  std::string out;
  for (const Field& f : fields()) out += fmt::format("{}={};", f.name, get(f.name));
  return out;
}

}  // namespace gpuopt
