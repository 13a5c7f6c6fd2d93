// The two kinds of Embedder (embeddings.h): an ONNX encoder run through a Session, pooled over
// its last hidden state, and a decoder run through a ModelRunner, its last token's final-norm
// hidden state.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/device.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "server/openai/embeddings.h"

namespace gpuopt::server::openai {

namespace fs = std::filesystem;
using nlohmann::json;

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kMax: return "max";
    case Pooling::kLast: return "last";
  }
  return "?";
}

namespace {

Result<json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return Status::NotFound("'{}': cannot be read", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument("'{}': not valid JSON", p.string());
  return j;
}

}  // namespace

Result<PoolingConfig> read_pooling_config(const fs::path& dir, bool decoder) {
  PoolingConfig c;
  c.pooling = decoder ? Pooling::kLast : Pooling::kMean;
  if (fs::exists(dir / "embedding.json")) {
    const std::string where = (dir / "embedding.json").string();
    GPUOPT_ASSIGN_OR_RETURN(json j, read_json(dir / "embedding.json"));
    if (!j.is_object()) return Status::InvalidArgument("'{}': expected an object", where);
    if (j.contains("pooling")) {
      const json& p = j["pooling"];
      if (p == "mean") c.pooling = Pooling::kMean;
      else if (p == "cls") c.pooling = Pooling::kCls;
      else if (p == "max") c.pooling = Pooling::kMax;
      else if (p == "last") c.pooling = Pooling::kLast;
      else return Status::InvalidArgument("'{}': pooling {:.60} is not one of mean, cls, max, last", where, p.dump());
    }
    if (j.contains("normalize")) {
      if (!j["normalize"].is_boolean()) return Status::InvalidArgument("'{}': normalize must be true or false", where);
      c.normalize = j["normalize"].get<bool>();
    }
    return c;
  }
  // sentence-transformers: 1_Pooling/config.json's pooling_mode_* flags, Normalize in modules.json.
  if (fs::exists(dir / "1_Pooling" / "config.json")) {
    const std::string where = (dir / "1_Pooling" / "config.json").string();
    GPUOPT_ASSIGN_OR_RETURN(json j, read_json(dir / "1_Pooling" / "config.json"));
    std::vector<std::pair<const char*, Pooling>> modes = {{"pooling_mode_cls_token", Pooling::kCls},
                                                          {"pooling_mode_mean_tokens", Pooling::kMean},
                                                          {"pooling_mode_max_tokens", Pooling::kMax},
                                                          {"pooling_mode_lasttoken", Pooling::kLast}};
    int on = 0;
    for (const auto& [key, mode] : modes)
      if (j.value(key, false)) {
        c.pooling = mode;
        ++on;
      }
    for (const char* other : {"pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
      if (j.value(other, false)) return Status::Unimplemented("'{}': {} is not supported (mean, cls, max, last)", where, other);
    if (on != 1)
      return Status::InvalidArgument("'{}': expected exactly one of pooling_mode_cls_token, _mean_tokens, _max_tokens, "
                                     "_lasttoken, found {}", where, on);
    c.normalize = false;
    if (fs::exists(dir / "modules.json")) {
      GPUOPT_ASSIGN_OR_RETURN(json m, read_json(dir / "modules.json"));
      if (m.is_array())
        for (const json& mod : m)
          if (mod.is_object() && mod.value("type", "") == "sentence_transformers.models.Normalize") c.normalize = true;
    }
  }
  return c;
}

std::vector<float> pool(const float* h, int64_t tokens, int64_t dim, const std::vector<int64_t>& mask,
                        const PoolingConfig& cfg) {
  std::vector<double> acc(static_cast<size_t>(dim), 0.0);
  int64_t n = 0, last = 0;
  for (int64_t t = 0; t < tokens; ++t)
    if (mask[static_cast<size_t>(t)]) last = t;
  switch (cfg.pooling) {
    case Pooling::kCls:
      for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] = h[d];
      break;
    case Pooling::kLast:
      for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] = h[last * dim + d];
      break;
    case Pooling::kMean:
      for (int64_t t = 0; t < tokens; ++t) {
        if (!mask[static_cast<size_t>(t)]) continue;
        ++n;
        for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += h[t * dim + d];
      }
      // sentence-transformers divides by the mask's sum clamped at 1e-9.
      for (auto& v : acc) v /= std::max<double>(static_cast<double>(n), 1e-9);
      break;
    case Pooling::kMax:
      std::fill(acc.begin(), acc.end(), -INFINITY);
      for (int64_t t = 0; t < tokens; ++t) {
        if (!mask[static_cast<size_t>(t)]) continue;
        for (int64_t d = 0; d < dim; ++d)
          acc[static_cast<size_t>(d)] = std::max<double>(acc[static_cast<size_t>(d)], h[t * dim + d]);
      }
      break;
  }
  if (cfg.normalize) {
    // torch.nn.functional.normalize: x / max(||x||, 1e-12).
    double ss = 0;
    for (double v : acc) ss += v * v;
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (auto& v : acc) v /= norm;
  }
  return std::vector<float>(acc.begin(), acc.end());
}

namespace {

class OnnxEmbedder final : public Embedder {
 public:
  const llm::Tokenizer& tokenizer() const override { return *tok_; }
  int64_t max_input_tokens() const override { return max_tokens_; }
  int64_t dimensions() const override { return dim_; }
  const PoolingConfig& pooling() const override { return pool_; }

  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int64_t>>& inputs) override {
    std::vector<std::vector<float>> out(inputs.size());
    // Inputs of similar lengths share a batch (less padding): sorted by length, run in slices.
    std::vector<size_t> order(inputs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return inputs[a].size() < inputs[b].size(); });
    for (size_t lo = 0; lo < order.size(); lo += static_cast<size_t>(max_batch_)) {
      const size_t hi = std::min(order.size(), lo + static_cast<size_t>(max_batch_));
      const int64_t B = static_cast<int64_t>(hi - lo);
      int64_t T = 0;
      for (size_t k = lo; k < hi; ++k) T = std::max<int64_t>(T, static_cast<int64_t>(inputs[order[k]].size()));
      if (fixed_tokens_ > 0) T = fixed_tokens_;  // an export with a fixed sequence length: padded to it
      std::vector<int64_t> ids(static_cast<size_t>(B * T), pad_id_), mask(static_cast<size_t>(B * T), 0);
      for (int64_t b = 0; b < B; ++b) {
        const auto& x = inputs[order[lo + static_cast<size_t>(b)]];
        for (size_t t = 0; t < x.size(); ++t) {
          ids[static_cast<size_t>(b * T) + t] = x[t];
          mask[static_cast<size_t>(b * T) + t] = 1;
        }
      }
      NamedTensors feed;
      auto make = [&](const TensorInfo& in, const std::vector<int64_t>& v) {
        return std::make_pair(in.name, Tensor::from_vector(in.dtype, {B, T}, v));
      };
      for (const TensorInfo& in : session_->inputs()) {
        if (in.name == "input_ids") feed.push_back(make(in, ids));
        else if (in.name == "attention_mask") feed.push_back(make(in, mask));
        else feed.push_back(make(in, std::vector<int64_t>(ids.size(), 0)));  // token_type_ids
      }
      GPUOPT_ASSIGN_OR_RETURN(NamedTensors res, session_->run(feed));
      const Tensor& h = res[out_index_].second;
      const Shape& s = h.shape();
      const bool pooled = s.size() == 2;
      if ((pooled && (s[0] != B || s[1] != dim_)) || (!pooled && (s.size() != 3 || s[0] != B || s[1] != T || s[2] != dim_)))
        return Status::Internal("embedding model output '{}' has shape {}, expected [{}, {}, {}]", res[out_index_].first,
                                h.describe(), B, T, dim_);
      std::vector<float> f(static_cast<size_t>(h.numel()));
      for (int64_t i = 0; i < h.numel(); ++i) f[static_cast<size_t>(i)] = static_cast<float>(h.get_f64(i));
      for (int64_t b = 0; b < B; ++b) {
        const size_t at = order[lo + static_cast<size_t>(b)];
        if (pooled) {
          PoolingConfig only_norm{Pooling::kCls, pool_.normalize};  // a single row: "cls" takes it as is
          out[at] = pool(f.data() + b * dim_, 1, dim_, {1}, only_norm);
        } else {
          std::vector<int64_t> m(mask.begin() + b * T, mask.begin() + (b + 1) * T);
          out[at] = pool(f.data() + b * T * dim_, T, dim_, m, pool_);
        }
      }
    }
    return out;
  }

  std::unique_ptr<Session> session_;
  std::unique_ptr<llm::Tokenizer> tok_;
  PoolingConfig pool_;
  int64_t max_tokens_ = 512, dim_ = 0, pad_id_ = 0;
  int64_t fixed_tokens_ = 0;  // the model's sequence dim when it is not dynamic
  int max_batch_ = 32;
  size_t out_index_ = 0;
};

}  // namespace

Result<std::shared_ptr<Embedder>> load_onnx_embedder(const fs::path& dir, const SessionOptions& options, int max_batch) {
  auto e = std::make_shared<OnnxEmbedder>();
  fs::path model;
  for (const char* c : {"model.onnx", "onnx/model.onnx", "1/model.onnx"})
    if (fs::is_regular_file(dir / c)) {
      model = dir / c;
      break;
    }
  if (model.empty()) return Status::NotFound("'{}': no model.onnx (nor onnx/model.onnx, 1/model.onnx)", dir.string());
  GPUOPT_ASSIGN_OR_RETURN(e->tok_, llm::Tokenizer::from_file(dir / "tokenizer.json"));
  GPUOPT_ASSIGN_OR_RETURN(e->pool_, read_pooling_config(dir, false));
  GPUOPT_ASSIGN_OR_RETURN(e->session_, Session::load(model.string(), options));
  const std::string where = model.string();
  bool has_ids = false;
  for (const TensorInfo& in : e->session_->inputs()) {
    if (in.name != "input_ids" && in.name != "attention_mask" && in.name != "token_type_ids")
      return Status::InvalidArgument("'{}': input '{}' is not one of input_ids, attention_mask, token_type_ids", where,
                                     in.name);
    if (in.dtype != DType::I64 && in.dtype != DType::I32)
      return Status::InvalidArgument("'{}': input '{}' is {}, expected int64 or int32", where, in.name,
                                     dtype_name(in.dtype));
    if (in.name == "input_ids" && in.rank_known && in.shape.size() == 2 && in.shape[1] > 0) e->fixed_tokens_ = in.shape[1];
    has_ids = has_ids || in.name == "input_ids";
  }
  if (!has_ids) return Status::InvalidArgument("'{}': no input_ids input", where);
  const auto& outs = e->session_->outputs();
  e->out_index_ = 0;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == "last_hidden_state") e->out_index_ = i;
  const TensorInfo& o = outs[e->out_index_];
  if (!o.rank_known || (o.shape.size() != 3 && o.shape.size() != 2) || o.shape.back() <= 0)
    return Status::InvalidArgument("'{}': output '{}' {} is neither [batch, tokens, dim] nor [batch, dim] with a fixed dim",
                                   where, o.name, o.shape_string());
  e->dim_ = o.shape.back();
  if (fs::exists(dir / "config.json")) {
    GPUOPT_ASSIGN_OR_RETURN(json c, read_json(dir / "config.json"));
    if (c.contains("max_position_embeddings") && c["max_position_embeddings"].is_number_integer())
      e->max_tokens_ = c["max_position_embeddings"].get<int64_t>();
    if (c.contains("pad_token_id") && c["pad_token_id"].is_number_integer()) e->pad_id_ = c["pad_token_id"].get<int64_t>();
  }
  if (e->fixed_tokens_ > 0) e->max_tokens_ = std::min(e->max_tokens_, e->fixed_tokens_);
  e->max_batch_ = std::max(1, max_batch);
  return std::shared_ptr<Embedder>(std::move(e));
}

}  // namespace gpuopt::server::openai
