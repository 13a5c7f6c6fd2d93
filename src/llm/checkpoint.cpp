// A model folder's weights: one safetensors file or shards named by model.safetensors.index.json;
// every tensor the config needs is checked (present, float dtype, exact shape) at open.
#include "llm/checkpoint.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <unordered_map>

#include "llm/quantized.h"
#include "llm/safetensors.h"

namespace gpuopt::llm {
namespace {

using nlohmann::json;

class FileCheckpoint final : public Checkpoint {
 public:
  const WeightView* find(const std::string& name) const override {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  const std::vector<WeightView>& tensors() const override { return tensors_; }
  size_t total_bytes() const override { return total_; }

  std::vector<std::unique_ptr<SafetensorsFile>> files;
  void add(const WeightView& w) {
    index_[w.name] = tensors_.size();
    tensors_.push_back(w);
    total_ += w.bytes;
  }
  // A quantized linear under its float name: [N, K], read through w.quant.
  Status add_quantized(const std::string& name, QuantizedLinear q, DType dt) {
    quants_.push_back(std::make_unique<QuantizedLinear>(std::move(q)));
    const QuantizedLinear* p = quants_.back().get();
    WeightView w;
    w.name = name;
    w.dtype = dt;
    w.shape = {p->N, p->K};
    w.bytes = p->packed_bytes();
    w.file_dtype = p->qweight->file_dtype;
    w.quant = p;
    add(w);
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<QuantizedLinear>> quants_;
  std::vector<WeightView> tensors_;
  std::unordered_map<std::string, size_t> index_;
  size_t total_ = 0;
};

// Random weights own their storage.
class OwnedCheckpoint final : public Checkpoint {
 public:
  const WeightView* find(const std::string& name) const override {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  const std::vector<WeightView>& tensors() const override { return tensors_; }
  size_t total_bytes() const override { return total_; }
  void add(WeightView w, std::vector<unsigned char> data) {
    w.data = data.data();
    w.bytes = data.size();
    total_ += data.size();
    storage_.push_back(std::move(data));
    index_[w.name] = tensors_.size();
    tensors_.push_back(std::move(w));
  }

 private:
  std::vector<std::vector<unsigned char>> storage_;
  std::vector<WeightView> tensors_;
  std::unordered_map<std::string, size_t> index_;
  size_t total_ = 0;
};

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

Result<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return Status::NotFound("'{}' cannot be read", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Shard names come from a file we do not control: a bare file name only, never a path out of the
// model folder.
bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\\') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_weights(const LlmConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> w;
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  w.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    w.push_back({p + "input_layernorm.weight", {h}});
    w.push_back({p + "self_attn.q_proj.weight", {q, h}});
    w.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    w.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (c.qkv_bias) {
      w.push_back({p + "self_attn.q_proj.bias", {q}});
      w.push_back({p + "self_attn.k_proj.bias", {kv}});
      w.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    w.push_back({p + "self_attn.o_proj.weight", {h, q}});
    w.push_back({p + "post_attention_layernorm.weight", {h}});
    w.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, h}});
    w.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}});
    w.push_back({p + "mlp.down_proj.weight", {h, c.intermediate_size}});
  }
  w.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) w.push_back({"lm_head.weight", {c.vocab_size, h}});
  return w;
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::filesystem::path& dir, const LlmConfig& cfg,
                                                    const LoadProgress& progress) {
  auto ckpt = std::make_unique<FileCheckpoint>();
  const auto expected = expected_weights(cfg);
  // Which file holds which tensor: the index's weight_map, or everything in model.safetensors.
  std::map<std::string, std::string> where;  // tensor -> file name
  std::vector<std::string> files;
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  const bool sharded = std::filesystem::exists(index_path);
  if (sharded) {
    GPUOPT_ASSIGN_OR_RETURN(std::string text, read_text(index_path));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
      return Status::InvalidArgument("{}: not a JSON object with a 'weight_map'", index_path.string());
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) {
      if (!it.value().is_string() || !plain_file_name(it.value().get<std::string>()))
        return Status::InvalidArgument("{}: tensor '{}' maps to {}, not a file name in the model folder",
                                       index_path.string(), it.key(), it.value().dump());
      where[it.key()] = it.value().get<std::string>();
    }
    for (const auto& [name, shape] : expected) {
      // A quantized linear is stored under other names (qweight...), checked when it is read.
      const bool maybe_quantized = cfg.quant.method != WeightQuant::Method::None && shape.size() == 2 &&
                                   name != "model.embed_tokens.weight";
      if (!maybe_quantized && !where.count(name))
        return Status::NotFound("{}: tensor '{}' is not in the weight_map", index_path.string(), name);
    }
    // Every shard the map names: a quantized checkpoint's tensors are not the float names.
    for (const auto& [name, file] : where)
      if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  } else {
    if (!std::filesystem::exists(dir / "model.safetensors"))
      return Status::NotFound("'{}' has neither model.safetensors nor model.safetensors.index.json", dir.string());
    files.push_back("model.safetensors");
  }

  std::map<std::string, size_t> file_index;
  size_t total = 0;
  for (const std::string& f : files) {
    std::error_code ec;
    const auto sz = std::filesystem::file_size(dir / f, ec);
    if (ec) {
      if (sharded)
        return Status::NotFound("'{}' (a shard named by {}) does not exist", (dir / f).string(), index_path.string());
      return Status::NotFound("'{}' does not exist", (dir / f).string());
    }
    total += static_cast<size_t>(sz);
  }
  size_t done = 0;
  for (const std::string& f : files) {
    GPUOPT_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(dir / f));
    done += file->file_bytes();
    if (progress) progress(done, total);
    file_index[f] = ckpt->files.size();
    ckpt->files.push_back(std::move(file));
  }
  auto file_of = [&](const std::string& name) -> const SafetensorsFile* {
    if (!sharded) return ckpt->files[0].get();
    auto it = where.find(name);
    return it == where.end() ? nullptr : ckpt->files[file_index.at(it->second)].get();
  };
  auto lookup = [&](const std::string& name) -> const WeightView* {
    const SafetensorsFile* f = file_of(name);
    return f ? f->find(name) : nullptr;
  };
  const WeightQuant& quant = cfg.quant;
  for (const auto& [name, shape] : expected) {
    const bool linear = shape.size() == 2 && name != "model.embed_tokens.weight";
    const std::string base = name.substr(0, name.size() - std::string(".weight").size());
    if (linear && quant.method != WeightQuant::Method::None) {
      const WeightView* fw = lookup(name);
      const bool quantized = quant.method == WeightQuant::Method::Fp8 ? fw && fw->file_dtype == "F8_E4M3"
                                                                      : lookup(base + ".qweight") != nullptr;
      if (quantized) {
        auto q = find_quantized_linear(lookup, base, quant, shape[0], shape[1]);
        if (!q.ok()) return q.status().with_context(dir.string());
        const DType dt = quant.method == WeightQuant::Method::Fp8 ? cfg.dtype : q->scales->dtype;
        GPUOPT_RETURN_IF_ERROR(ckpt->add_quantized(name, std::move(*q), dt));
        continue;
      }
    }
    const SafetensorsFile* fp = file_of(name);
    if (!fp) return Status::NotFound("{}: tensor '{}' is not in the weight_map", index_path.string(), name);
    const SafetensorsFile& file = *fp;
    const WeightView* w = file.find(name);
    if (!w && linear && quant.method == WeightQuant::Method::None && lookup(base + ".qweight"))
      return Status::InvalidArgument("{}: tensor '{}' is quantized (qweight) but config.json has no quantization_config",
                                     file.path().string(), base);
    if (!w) return Status::NotFound("{}: tensor '{}' is missing", file.path().string(), name);
    if (w->dtype != DType::F16 && w->dtype != DType::BF16 && w->dtype != DType::F32)
      return Status::Unimplemented("{}: tensor '{}' has dtype {}; weights must be F16, BF16 or F32{}",
                                   file.path().string(), name,
                                   w->dtype == DType::Undefined ? w->file_dtype : std::string(dtype_name(w->dtype)),
                                   w->file_dtype == "F8_E4M3" ? " (fp8 needs a compressed-tensors quantization_config)" : "");
    if (w->shape != shape)
      return Status::InvalidArgument("{}: tensor '{}' has shape {}, the config needs {}", file.path().string(), name,
                                     shape_str(w->shape), shape_str(shape));
    ckpt->add(*w);
  }
  // Optional: an FP8 KV cache's per-layer scales (compressed-tensors), read by kv_cache_scales.
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (const char* kv : {"k_scale", "v_scale"}) {
      const std::string name = fmt::format("model.layers.{}.self_attn.{}", l, kv);
      const WeightView* w = lookup(name);
      if (!w) continue;
      if (w->dtype != DType::F16 && w->dtype != DType::BF16 && w->dtype != DType::F32)
        return Status::Unimplemented("{}: tensor '{}' has dtype {}; scales must be F16, BF16 or F32", dir.string(), name,
                                     w->file_dtype);
      ckpt->add(*w);
    }
  return std::unique_ptr<Checkpoint>(std::move(ckpt));
}

std::unique_ptr<Checkpoint> random_checkpoint(const LlmConfig& cfg, DType dtype, uint64_t seed) {
  auto ckpt = std::make_unique<OwnedCheckpoint>();
  // One generator for the whole model in expected_weights order: the same seed gives the same
  // weights on any machine (the Box-Muller below is ours, not the library's normal_distribution,
  // whose algorithm is implementation-defined).
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  const size_t es = dtype_size(dtype);
  for (const auto& [name, shape] : expected_weights(cfg)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<unsigned char> data(static_cast<size_t>(n) * es);
    const bool norm = name.find("layernorm") != std::string::npos || name == "model.norm.weight";
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    for (int64_t i = 0; i < n; ++i) {
      float v;
      if (norm)
        v = 1.0f;
      else if (bias)
        v = 0.0f;
      else
        v = static_cast<float>(0.02 * std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform()));
      unsigned char* dst = data.data() + static_cast<size_t>(i) * es;
      if (dtype == DType::F32) {
        std::memcpy(dst, &v, 4);
      } else {
        const uint16_t b = dtype == DType::F16 ? Half::from_float(v) : BFloat16::from_float(v);
        std::memcpy(dst, &b, 2);
      }
    }
    WeightView w;
    w.name = name;
    w.dtype = dtype;
    w.shape = shape;
    ckpt->add(std::move(w), std::move(data));
  }
  return ckpt;
}

}  // namespace gpuopt::llm
