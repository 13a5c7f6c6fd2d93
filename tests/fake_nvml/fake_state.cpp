// Script loading, sequence expansion and failure injection for the fake NVML library.
#include "fake_state.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fake_nvml {

State& state() {
  static State s;
  return s;
}

namespace {

void add_mig(FakeDevice& parent) {
  auto it = parent.j.find("mig");
  if (it == parent.j.end() || !it->is_object() || !it->contains("devices")) return;
  unsigned i = 0;
  for (const auto& m : (*it)["devices"]) {
    auto d = std::make_unique<FakeDevice>();
    d->j = m;
    d->index = i++;
    d->parent = &parent;
    parent.mig.push_back(std::move(d));
  }
}

bool is_sequence(const json& v) {
  if (v.is_object() && v.size() == 1 && v.contains("seq") && v["seq"].is_array()) return true;
  if (!v.is_array() || v.empty()) return false;
  for (const auto& e : v)
    if (e.is_structured()) return false;
  return true;
}

json expand(const json& v, size_t* counter) {
  if (!is_sequence(v)) return v;
  const json& seq = v.is_object() ? v["seq"] : v;
  if (seq.empty()) return json();
  size_t k = (*counter)++;
  return seq[std::min(k, seq.size() - 1)];
}

const json* lookup(const json& root, const std::string& path) {
  const json* cur = &root;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

std::string strip_version(const std::string& fn) {
  auto pos = fn.rfind("_v");
  if (pos != std::string::npos && pos + 2 < fn.size() &&
      fn.find_first_not_of("0123456789", pos + 2) == std::string::npos)
    return fn.substr(0, pos);
  return fn;
}

}  // namespace

// The fake's own name table (not gpuopt's), so the codes are checked against an independent list.
std::optional<Return> parse_error_name(std::string name) {
  if (name.rfind("NVML_ERROR_", 0) == 0) name = name.substr(11);
  if (name.rfind("NVML_", 0) == 0) name = name.substr(5);
  static const std::map<std::string, int> kCodes = {
      {"SUCCESS", 0},           {"UNINITIALIZED", 1},        {"INVALID_ARGUMENT", 2},   {"NOT_SUPPORTED", 3},
      {"NO_PERMISSION", 4},     {"ALREADY_INITIALIZED", 5},  {"NOT_FOUND", 6},          {"INSUFFICIENT_SIZE", 7},
      {"INSUFFICIENT_POWER", 8}, {"DRIVER_NOT_LOADED", 9},   {"TIMEOUT", 10},           {"IRQ_ISSUE", 11},
      {"LIBRARY_NOT_FOUND", 12}, {"FUNCTION_NOT_FOUND", 13}, {"CORRUPTED_INFOROM", 14}, {"GPU_IS_LOST", 15},
      {"RESET_REQUIRED", 16},   {"OPERATING_SYSTEM", 17},    {"LIB_RM_VERSION_MISMATCH", 18}, {"IN_USE", 19},
      {"MEMORY", 20},           {"NO_DATA", 21},             {"INSUFFICIENT_RESOURCES", 23},
      {"ARGUMENT_VERSION_MISMATCH", 25}, {"DEPRECATED", 26}, {"NOT_READY", 27},         {"GPU_NOT_FOUND", 28},
      {"INVALID_STATE", 29},    {"UNKNOWN", 999}};
  auto it = kCodes.find(name);
  if (it == kCodes.end()) return std::nullopt;
  return static_cast<Return>(it->second);
}

std::optional<std::string> load_script(State& s) {
  s.root = json::object();
  s.devices.clear();
  s.reads.clear();
  s.event_waits = 0;
  s.delivered_xids.clear();
  const char* path = std::getenv("GPUOPT_FAKE_NVML_SCRIPT");
  if (path && *path) {
    std::ifstream in(path);
    if (!in) return std::string("fake NVML: cannot read script ") + path;
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      s.root = json::parse(ss.str());
    } catch (const std::exception& e) {
      return std::string("fake NVML: bad JSON in ") + path + ": " + e.what();
    }
    if (!s.root.is_object()) return std::string("fake NVML: ") + path + ": top level must be an object";
  }
  unsigned i = 0;
  if (s.root.contains("devices")) {
    for (const auto& dj : s.root["devices"]) {
      auto d = std::make_unique<FakeDevice>();
      d->j = dj;
      d->index = i++;
      add_mig(*d);
      s.devices.push_back(std::move(d));
    }
  }
  return std::nullopt;
}

std::optional<json> field(FakeDevice& d, const std::string& path, const std::string& counter, bool advance) {
  const json* v = lookup(d.j, path);
  if (!v || v->is_null()) return std::nullopt;
  size_t& c = d.reads[counter.empty() ? path : counter];
  size_t peek = c;
  json out = expand(*v, advance ? &c : &peek);
  if (out.is_null()) return std::nullopt;
  return out;
}

std::optional<json> global_field(State& s, const std::string& path) {
  const json* v = lookup(s.root, path);
  if (!v || v->is_null()) return std::nullopt;
  json out = expand(*v, &s.reads[path]);
  if (out.is_null()) return std::nullopt;
  return out;
}

Return failure(State& s, FakeDevice* d, const char* fn) {
  const std::string base = strip_version(fn);
  auto check = [&](const json& root, std::map<std::string, size_t>& reads) -> std::optional<Return> {
    auto it = root.find("fail");
    if (it == root.end() || !it->is_object()) return std::nullopt;
    for (const std::string& key : {std::string(fn), base}) {
      auto f = it->find(key);
      if (f == it->end()) continue;
      json v = expand(*f, &reads["fail:" + key]);
      if (!v.is_string()) return gpuopt::nvml::kErrorUnknown;
      auto r = parse_error_name(v.get<std::string>());
      if (!r) {
        std::fprintf(stderr, "fake NVML: unknown error name '%s' for %s\n", v.get<std::string>().c_str(), fn);
        return gpuopt::nvml::kErrorUnknown;
      }
      return *r;
    }
    return std::nullopt;
  };
  for (FakeDevice* cur = d; cur; cur = cur->parent)
    if (auto r = check(cur->j, cur->reads)) return *r;
  if (auto r = check(s.root, s.reads)) return *r;
  return gpuopt::nvml::kSuccess;
}

void delay(State& s, FakeDevice* d, const char* fn) {
  const std::string base = strip_version(fn);
  long long us = -1;
  auto from = [&](const json& root) {
    auto it = root.find("delay_us");
    if (it == root.end() || !it->is_object()) return;
    for (const std::string& key : {std::string(fn), base})
      if (auto f = it->find(key); f != it->end() && f->is_number() && us < 0) us = f->get<long long>();
  };
  for (FakeDevice* cur = d; cur && us < 0; cur = cur->parent) from(cur->j);
  if (us < 0) from(s.root);
  if (us < 0) {
    // GPUOPT_FAKE_NVML_DELAY_US="nvmlDeviceGetProcessUtilization=5000,nvmlDeviceGetPowerUsage=100"
    const char* env = std::getenv("GPUOPT_FAKE_NVML_DELAY_US");
    std::string text = env ? env : "";
    size_t start = 0;
    while (us < 0 && start < text.size()) {
      size_t comma = text.find(',', start);
      std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t eq = item.find('=');
      if (eq != std::string::npos && (item.substr(0, eq) == fn || item.substr(0, eq) == base))
        us = std::atoll(item.c_str() + eq + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (us <= 0) return;
  // Spin rather than sleep: the real driver's cost is CPU (ioctls), and the exporter's self-bench
  // measures CPU share, so the fake's delay must burn CPU too.
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

FakeDevice* as_device(gpuopt::nvml::Device h) {
  auto* p = reinterpret_cast<FakeDevice*>(h);
  for (auto& d : state().devices) {
    if (d.get() == p) return p;
    for (auto& m : d->mig)
      if (m.get() == p) return p;
  }
  return nullptr;
}

gpuopt::nvml::Device as_handle(FakeDevice* d) { return reinterpret_cast<gpuopt::nvml::Device>(d); }

}  // namespace fake_nvml
