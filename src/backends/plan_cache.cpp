#include "backends/plan_cache.h"

#include "core/log.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace gpuopt {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kMagic = "gpuopt-plan-cache 1";

bool valid_text(std::string_view s) {
  for (char c : s)
    if (c == '\n' || c == '\r' || c == '\0') return false;
  return true;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {
// FNV-1a over 64-bit words (the tail bytewise): the model hash reads hundreds of MB at start.
uint64_t fnv1a64_words(std::string_view bytes, uint64_t h) {
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h ^= w;
    h *= 1099511628211ull;
  }
  return fnv1a64(bytes.substr(i), h);
}
}  // namespace

std::vector<std::pair<std::string, std::string>> PlanCacheKey::fields() const {
  return {{"model", model}, {"gpu", gpu}, {"driver", driver}, {"cudnn", cudnn}, {"cublas", cublas}, {"gpuopt", gpuopt}};
}

Result<std::string> model_hash(const std::string& model_path, std::string_view settings) {
  std::ifstream f(model_path, std::ios::binary);
  if (!f) return Status::NotFound("cannot read '{}' to hash it for the plan cache", model_path);
  uint64_t h = fnv1a64(settings);
  std::vector<char> buf(size_t{1} << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a64_words(std::string_view(buf.data(), static_cast<size_t>(f.gcount())), h);
  }
  return fmt::format("{:016x}", h);
}

std::string serialize_plan_cache(const PlanCacheKey& key, const PlanEntries& entries) {
  std::string out = std::string(kMagic) + "\n";
  for (const auto& [k, v] : key.fields()) out += fmt::format("{} {}\n", k, v);
  size_t n = 0;
  for (const auto& [k, v] : entries) {
    if (!valid_text(k) || !valid_text(v) || k.find(" = ") != std::string::npos) continue;  // never written
    out += fmt::format("entry {} = {}\n", k, v);
    ++n;
  }
  out += fmt::format("end {} {:016x}\n", n, fnv1a64(out));
  return out;
}

Result<std::pair<PlanCacheKey, PlanEntries>> parse_plan_cache(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return Status::InvalidArgument("truncated: the last line has no newline");
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (lines.empty() || lines[0] != kMagic) return Status::InvalidArgument("line 1: not a gpuopt plan cache (version 1)");
  PlanCacheKey key;
  const auto fields = key.fields();
  if (lines.size() < 1 + fields.size() + 1) return Status::InvalidArgument("truncated: {} lines", lines.size());
  std::string* slots[] = {&key.model, &key.gpu, &key.driver, &key.cudnn, &key.cublas, &key.gpuopt};
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string_view l = lines[1 + i];
    const std::string& name = fields[i].first;
    if (l.substr(0, name.size() + 1) != name + " ")
      return Status::InvalidArgument("line {}: expected '{} ...'", 2 + i, name);
    *slots[i] = std::string(l.substr(name.size() + 1));
  }
  PlanEntries entries;
  const size_t last = lines.size() - 1;
  for (size_t i = 1 + fields.size(); i < last; ++i) {
    const std::string_view l = lines[i];
    const size_t eq = l.find(" = ");
    if (l.substr(0, 6) != "entry " || eq == std::string_view::npos)
      return Status::InvalidArgument("line {}: expected 'entry KEY = VALUE'", i + 1);
    entries[std::string(l.substr(6, eq - 6))] = std::string(l.substr(eq + 3));
  }
  // The end line: the entry count and the checksum of every byte before it.
  const size_t body = text.size() - lines[last].size() - 1;
  const std::string want = fmt::format("end {} {:016x}", entries.size(), fnv1a64(text.substr(0, body)));
  if (lines[last] != want)
    return Status::InvalidArgument("line {}: the end line does not match the contents (truncated or changed)", last + 1);
  return std::make_pair(std::move(key), std::move(entries));
}

const char* PlanCacheLoad::state_name() const {
  switch (state) {
    case State::kOff: return "off";
    case State::kCold: return "cold";
    case State::kWarm: return "warm";
    case State::kStale: return "stale";
    case State::kCorrupt: return "corrupt";
  }
  return "?";
}

std::string plan_cache_path(const std::string& dir, const PlanCacheKey& key) {
  return (fs::path(dir) / (key.model + ".plans")).string();
}

PlanCacheLoad load_plan_cache(const std::string& dir, const PlanCacheKey& key) {
  PlanCacheLoad r;
  r.path = plan_cache_path(dir, key);
  std::ifstream f(r.path, std::ios::binary);
  if (!f) {
    r.state = PlanCacheLoad::State::kCold;
    return r;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto parsed = parse_plan_cache(ss.str());
  if (!parsed.ok()) {
    r.state = PlanCacheLoad::State::kCorrupt;
    r.note = parsed.status().message();
    GPUOPT_LOG(warn, "plan cache {}: corrupt, ignored ({}); it is rewritten after this start", r.path, r.note);
    return r;
  }
  const PlanCacheKey& have = parsed->first;
  const auto want_f = key.fields(), have_f = have.fields();
  for (size_t i = 0; i < want_f.size(); ++i)
    if (want_f[i].second != have_f[i].second) {
      r.state = PlanCacheLoad::State::kStale;
      r.note = fmt::format("made for {} '{}', this is '{}'", want_f[i].first, have_f[i].second, want_f[i].second);
      GPUOPT_LOG(warn, "plan cache {}: stale, ignored ({}); it is rewritten after this start", r.path, r.note);
      return r;
    }
  r.state = PlanCacheLoad::State::kWarm;
  r.entries = std::move(parsed->second);
  return r;
}

Status save_plan_cache(const std::string& dir, const PlanCacheKey& key, const PlanEntries& entries) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("plan cache: cannot create '{}': {}", dir, ec.message());
  const std::string path = plan_cache_path(dir, key);
  static std::atomic<uint64_t> seq{0};  // two instances of one model may save at once
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(getpid()), seq.fetch_add(1));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    const std::string text = serialize_plan_cache(key, entries);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!f) return Status::Unavailable("plan cache: cannot write '{}'", tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::Unavailable("plan cache: cannot replace '{}'", path);
  }
  return Status::Ok();
}

}  // namespace gpuopt
