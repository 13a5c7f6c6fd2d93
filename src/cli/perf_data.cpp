// perf_data.h: --input-data requests, validation, arrival schedules.
#include "cli/perf_data.h"

#include "server/kserve.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>

namespace gpuopt::cli {
namespace {

using nlohmann::json;

// One tensor of an entry: a flat array, or {"content": [...], "shape": [...]}; `shape` is the
// sample's (without the batch dim), repeated `batch` times when the model batches.
Result<Tensor> entry_tensor(const json& v, const std::string& name, DType dt, Shape sample, int64_t batch, bool batched,
                            const std::string& where) {
  const json* content = &v;
  if (v.is_object()) {
    if (!v.contains("content")) return Status::InvalidArgument("{}: '{}' has no \"content\"", where, name);
    content = &v["content"];
    if (v.contains("shape")) {
      if (!v["shape"].is_array()) return Status::InvalidArgument("{}: '{}' shape is not an array", where, name);
      sample.clear();
      for (const auto& d : v["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          return Status::InvalidArgument("{}: '{}' shape {} is not a list of sizes", where, name, v["shape"].dump());
        sample.push_back(d.get<int64_t>());
      }
    }
  }
  if (!content->is_array()) return Status::InvalidArgument("{}: '{}' is not an array of values", where, name);
  for (int64_t d : sample)
    if (d < 0)
      return Status::InvalidArgument("{}: '{}' has a dynamic dim: give {{\"content\": [...], \"shape\": [...]}}", where, name);
  const int64_t per = shape_numel(sample);
  if (static_cast<int64_t>(content->size()) != per)
    return Status::InvalidArgument("{}: '{}' has {} values, its shape {} needs {}", where, name, content->size(),
                                   shape_to_string(sample), per);
  Shape shape = sample;
  if (batched) shape.insert(shape.begin(), batch);
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dt, shape, name));
  const int64_t copies = batched ? batch : 1;
  for (int64_t b = 0; b < copies; ++b)
    for (int64_t i = 0; i < per; ++i) {
      const json& x = (*content)[static_cast<size_t>(i)];
      if (dt == DType::String) {
        if (!x.is_string()) return Status::InvalidArgument("{}: '{}' element {} is not a string", where, name, i);
        t.strings()[static_cast<size_t>(b * per + i)] = x.get<std::string>();
      } else if (x.is_number() || x.is_boolean()) {
        t.set_f64(b * per + i, x.is_boolean() ? (x.get<bool>() ? 1.0 : 0.0) : x.get<double>());
      } else {
        return Status::InvalidArgument("{}: '{}' element {} is not a number", where, name, i);
      }
    }
  return t;
}

}  // namespace

Result<std::vector<PerfRequest>> load_input_data(const std::string& path, const json& meta, int64_t batch, bool binary) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("--input-data '{}': cannot open the file", path);
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument("--input-data '{}': not JSON", path);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
    return Status::InvalidArgument("--input-data '{}': expected {{\"data\": [{{\"INPUT\": [...]}}, ...]}}", path);
  const json* validation = j.contains("validation_data") ? &j["validation_data"] : nullptr;
  if (validation && (!validation->is_array() || validation->size() != j["data"].size()))
    return Status::InvalidArgument("--input-data '{}': validation_data must have one entry per data entry", path);
  std::vector<PerfRequest> out;
  for (size_t k = 0; k < j["data"].size(); ++k) {
    const json& e = j["data"][k];
    const std::string where = fmt::format("--input-data '{}' entry {}", path, k);
    if (!e.is_object()) return Status::InvalidArgument("{}: not an object of inputs", where);
    std::vector<std::pair<std::string, Tensor>> inputs;
    for (const auto& mi : meta["inputs"]) {
      const std::string name = mi["name"];
      if (!e.contains(name)) return Status::InvalidArgument("{}: no value for input '{}'", where, name);
      auto dt = dtype_from_kserve(mi["datatype"].get<std::string>());
      if (!dt) return Status::Unimplemented("input '{}': datatype {}", name, mi["datatype"].dump());
      Shape shape = mi["shape"].get<Shape>();
      const bool batched = !shape.empty() && shape[0] < 0;
      if (batched) shape.erase(shape.begin());
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, entry_tensor(e[name], name, *dt, shape, batch, batched, where));
      inputs.emplace_back(name, std::move(t));
    }
    for (const auto& [name, v] : e.items()) {
      bool known = false;
      for (const auto& mi : meta["inputs"]) known = known || mi["name"] == name;
      if (!known) return Status::InvalidArgument("{}: the model has no input '{}'", where, name);
    }
    PerfRequest r;
    r.body = server::encode_infer_request(inputs, binary, binary, "", &r.header_length);
    if (validation) {
      const json& ve = (*validation)[k];
      if (!ve.is_object()) return Status::InvalidArgument("{}: validation_data entry is not an object", where);
      for (const auto& [name, v] : ve.items()) {
        const json* mo = nullptr;
        for (const auto& o : meta["outputs"])
          if (o["name"] == name) mo = &o;
        if (!mo) return Status::InvalidArgument("{}: validation_data names no output of the model: '{}'", where, name);
        auto dt = dtype_from_kserve((*mo)["datatype"].get<std::string>());
        if (!dt) return Status::Unimplemented("output '{}': datatype {}", name, (*mo)["datatype"].dump());
        Shape shape = (*mo)["shape"].get<Shape>();
        const bool batched = !shape.empty() && shape[0] < 0;
        if (batched) shape.erase(shape.begin());
        GPUOPT_ASSIGN_OR_RETURN(Tensor t, entry_tensor(v, name, *dt, shape, batch, batched, where + " validation_data"));
        r.expected.emplace_back(name, std::move(t));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

Status check_outputs(const PerfRequest& r, const std::vector<std::pair<std::string, Tensor>>& outs) {
  for (const auto& [name, want] : r.expected) {
    const Tensor* got = nullptr;
    for (const auto& [n, t] : outs)
      if (n == name) got = &t;
    if (!got) return Status::FailedPrecondition("validation: the response has no output '{}'", name);
    if (got->numel() != want.numel())
      return Status::FailedPrecondition("validation: output '{}' has {} values, expected {}", name, got->numel(), want.numel());
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (want.dtype() == DType::String) {
        if (got->dtype() != DType::String || got->strings()[static_cast<size_t>(i)] != want.strings()[static_cast<size_t>(i)])
          return Status::FailedPrecondition("validation: output '{}' element {} differs", name, i);
        continue;
      }
      const double a = got->get_f64(i), b = want.get_f64(i);
      if (!(std::abs(a - b) <= 1e-6 + 1e-5 * std::abs(b)))
        return Status::FailedPrecondition("validation: output '{}' element {} is {}, expected {}", name, i, a, b);
    }
  }
  return Status::Ok();
}

ArrivalSchedule::ArrivalSchedule(double rate, bool poisson, Clock::time_point start, uint64_t seed)
    : rate_(rate), poisson_(poisson), start_(start), rng_(seed) {}

ArrivalSchedule::Clock::time_point ArrivalSchedule::next() {
  std::lock_guard<std::mutex> lock(mu_);
  double at = 0;
  if (poisson_) {
    at = t_;
    t_ += std::exponential_distribution<double>(rate_)(rng_);
  } else {
    at = static_cast<double>(k_++) / rate_;
  }
  return start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
}

Result<std::vector<double>> parse_range(const std::string& s) {
  double a = 0, b = 0, step = 1;
  int n = std::sscanf(s.c_str(), "%lf:%lf:%lf", &a, &b, &step);
  if (n < 1 || a <= 0 || step <= 0) return Status::InvalidArgument("bad range '{}' (expected start[:end[:step]])", s);
  if (n == 1) b = a;
  std::vector<double> v;
  for (double x = a; x <= b + 1e-9; x += step) v.push_back(x);
  return v;
}

}  // namespace gpuopt::cli
