// random_feeds: seeded inputs at a chosen batch size (inputs.h).
#include "profile/inputs.h"

#include <fmt/format.h>

#include <cstdlib>
#include <random>

namespace gpuopt::profile {

Result<Shape> random_input_shape(const TensorInfo& in, int64_t batch, const std::map<std::string, int64_t>& dims,
                                 const std::string& alternative) {
  if (!in.rank_known)
    return Status::InvalidArgument("input '{}' has no declared shape{}", in.name,
                                   alternative.empty() ? ", so random inputs cannot be made for it"
                                                       : "; give it with " + alternative);
  Shape shape;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] >= 0) {
      shape.push_back(in.shape[d]);
    } else if (auto it = dims.find(in.dims[d]); it != dims.end()) {
      shape.push_back(it->second);
    } else if (d == 0) {
      shape.push_back(batch);  // the dynamic batch
    } else {
      return Status::InvalidArgument("input '{}' dim {} is symbolic ('{}'): give --dim {}=N{}", in.name, d, in.dims[d],
                                     in.dims[d], alternative.empty() ? "" : " or " + alternative);
    }
  }
  return shape;
}

Result<NamedTensors> random_feeds(const Session& s, int64_t batch, const std::map<std::string, int64_t>& dims,
                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uf(-1.0, 1.0);
  std::uniform_int_distribution<int> ui(0, 7);
  NamedTensors feeds;
  for (const TensorInfo& in : s.inputs()) {
    GPUOPT_ASSIGN_OR_RETURN(Shape shape, random_input_shape(in, batch, dims));
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(in.dtype, shape, in.name));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (in.dtype == DType::String) t.strings()[static_cast<size_t>(i)] = fmt::format("s{}", ui(rng));
      else if (dtype_is_float(in.dtype)) t.set_f64(i, uf(rng));
      else if (in.dtype == DType::Bool) t.set_f64(i, ui(rng) & 1);
      else t.set_f64(i, ui(rng));
    }
    feeds.emplace_back(in.name, std::move(t));
  }
  return feeds;
}

Result<std::map<std::string, int64_t>> parse_dims(const std::vector<std::string>& kvs) {
  std::map<std::string, int64_t> m;
  for (const std::string& kv : kvs) {
    const size_t eq = kv.find('=');
    const int64_t v = eq == std::string::npos ? 0 : std::atoll(kv.c_str() + eq + 1);
    if (eq == 0 || v <= 0) return Status::InvalidArgument("--dim '{}': expected NAME=POSITIVE_INT", kv);
    m[kv.substr(0, eq)] = v;
  }
  return m;
}

}  // namespace gpuopt::profile
