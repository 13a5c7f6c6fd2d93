// TfIdfVectorizer: n-gram counts (with skips) of int64 or string sequences against a pool of
// n-grams, weighted TF, IDF or TFIDF. Matching follows the ONNX reference (and ONNX Runtime): a
// trie of the pool's n-grams; for each skip distance 1..max_skip_count+1 and each start position
// the items start, start+d, start+2d, ... are followed down the trie and every n-gram of length
// >= min_gram_length met on the way counts once; 1-grams are counted in the first pass only.
#include "ops/common/tensor_util.h"

#include <cstring>
#include <map>
#include <memory>

namespace gpuopt {
using namespace tensor_util;

namespace {

struct Trie {
  int64_t id = 0;  // 1-based n-gram id, 0 for a prefix that is not itself a pool n-gram
  std::map<std::string, std::unique_ptr<Trie>> kids;
};

std::string int_key(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }

struct TfIdf {
  int64_t min_n = 0, max_n = 0, max_skip = 0, out_size = 0;
  std::string mode;
  std::vector<int64_t> indexes;
  std::vector<float> weights;
  bool strings = false;
  Trie root;
};

Result<TfIdf> build_tfidf(const Node& node) {
  TfIdf t;
  t.min_n = node.attr_i("min_gram_length", 0);
  t.max_n = node.attr_i("max_gram_length", 0);
  t.max_skip = node.attr_i("max_skip_count", 0);
  t.mode = node.attr_s("mode", "");
  if (t.mode != "TF" && t.mode != "IDF" && t.mode != "TFIDF")
    return Status::InvalidArgument("{}: mode '{}' is not TF, IDF or TFIDF", node_label(node), t.mode);
  if (t.min_n < 1 || t.max_n < t.min_n || t.max_skip < 0)
    return Status::InvalidArgument("{}: need 1 <= min_gram_length {} <= max_gram_length {} and max_skip_count {} >= 0",
                                   node_label(node), t.min_n, t.max_n, t.max_skip);
  t.indexes = node.attr_ints("ngram_indexes");
  if (t.indexes.empty()) return Status::InvalidArgument("{}: ngram_indexes is empty", node_label(node));
  for (int64_t i : t.indexes) {
    if (i < 0) return Status::InvalidArgument("{}: ngram_indexes has a negative entry {}", node_label(node), i);
    t.out_size = std::max(t.out_size, i + 1);
  }
  t.weights = node.attr_floats("weights");
  if (!t.weights.empty() && static_cast<int64_t>(t.weights.size()) < t.out_size)
    return Status::InvalidArgument("{}: weights has {} values for {} outputs", node_label(node), t.weights.size(), t.out_size);
  std::vector<std::string> pool;
  if (const Attribute* a = node.attr("pool_strings"); a && !a->strings.empty()) {
    t.strings = true;
    pool = a->strings;
  } else {
    for (int64_t v : node.attr_ints("pool_int64s")) pool.push_back(int_key(v));
  }
  const std::vector<int64_t> counts = node.attr_ints("ngram_counts");
  const int64_t total = static_cast<int64_t>(pool.size());
  int64_t id = 1;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t start = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : total;
    if (start < 0 || end > total || end < start)
      return Status::InvalidArgument("{}: ngram_counts {} does not fit a pool of {}", node_label(node),
                                     dims_string(counts), total);
    const int64_t grams = (end - start) / n;
    if (n < t.min_n || n > t.max_n) {
      id += grams;
      continue;
    }
    for (int64_t g = 0; g < grams; ++g, ++id) {
      Trie* m = &t.root;
      for (int64_t k = 0; k < n; ++k) {
        auto& slot = m->kids[pool[start + g * n + k]];
        if (!slot) slot = std::make_unique<Trie>();
        m = slot.get();
      }
      m->id = id;
    }
  }
  if (id - 1 > static_cast<int64_t>(t.indexes.size()))
    return Status::InvalidArgument("{}: the pool holds {} n-grams but ngram_indexes only {}", node_label(node), id - 1,
                                   t.indexes.size());
  return t;
}

}  // namespace

Status infer_TfIdfVectorizer(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_ASSIGN_OR_RETURN(TfIdf t, build_tfidf(ctx.node));
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && x.dtype != (t.strings ? DType::String : DType::I64) &&
      !(!t.strings && x.dtype == DType::I32))
    return ctx.error("input dtype {} does not match the pool ({})", dtype_name(x.dtype), t.strings ? "string" : "int64/int32");
  if (x.rank_known && x.shape.size() > 2) return ctx.error("input must be [C] or [N, C], got rank {}", x.shape.size());
  if (x.rank_known && x.shape.size() == 2) set_output(ctx, 0, DType::F32, {x.shape[0], t.out_size});
  else set_output(ctx, 0, DType::F32, {t.out_size});
  return Status::Ok();
}

Status cpu_TfIdfVectorizer(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(TfIdf t, build_tfidf(ctx.node));
  const Tensor& x = ctx.in(0);
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, C = x.rank() == 0 ? 1 : x.dim(-1);
  std::vector<std::string> items(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) items[i] = x.dtype() == DType::String ? x.strings()[i] : int_key(x.get_i64(i));
  std::vector<int64_t> freq(static_cast<size_t>(rows * t.out_size), 0);
  for (int64_t r = 0; r < rows && !t.root.kids.empty(); ++r) {
    const std::string* row = items.data() + r * C;
    int64_t first_n = t.min_n;
    for (int64_t d = 1; d <= t.max_skip + 1; ++d) {
      for (int64_t s = 0; s < C; ++s) {
        if (s + d * (first_n - 1) >= C) break;
        const Trie* m = &t.root;
        int64_t n = 1;
        for (int64_t it = s; !m->kids.empty() && n <= t.max_n && it < C; it += d, ++n) {
          auto f = m->kids.find(row[it]);
          if (f == m->kids.end()) break;
          m = f->second.get();
          if (n >= first_n && m->id != 0) ++freq[r * t.out_size + t.indexes[m->id - 1]];
        }
      }
      if (first_n == 1) {
        first_n = 2;
        if (first_n > t.max_n) break;
      }
    }
  }
  float* y = ctx.out(0).data<float>();
  for (int64_t p = 0; p < rows * t.out_size; ++p) {
    const int64_t f = freq[p], col = p % t.out_size;
    const bool w = !t.weights.empty();
    if (t.mode == "TF") y[p] = static_cast<float>(f);
    else if (t.mode == "IDF") y[p] = f > 0 ? (w ? t.weights[col] : 1.0f) : 0.0f;
    else y[p] = w ? t.weights[col] * static_cast<float>(f) : static_cast<float>(f);
  }
  return Status::Ok();
}
double flops_TfIdfVectorizer(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
