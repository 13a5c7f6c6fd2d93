// Internal to the KServe codec (included by kserve.cpp only): the streaming JSON reader behind
// decode_infer_request and decode_infer_response. A small DOM is built for everything but tensor
// `data`, whose elements go straight into the typed tensor (or a compact buffer) as nlohmann's
// SAX parser meets them; the parser keeps its state on the heap, so nothing here recurses.
//
//   MemoryCharge mem(limits);
//   GPUOPT_ASSIGN_OR_RETURN(ParsedHeader h, read_header(json_text, "inputs", body.size(), limits, &mem));
//   // h.dom: the header without any tensor's `data`; h.data[i]: the `data` of h.dom["inputs"][i]
//   GPUOPT_ASSIGN_OR_RETURN(Tensor t, finish_data(std::move(*h.data[i]), spec, &mem));
#pragma once

#include "server/kserve.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "server/kserve_sax_types.h"

namespace gpuopt::server::detail {

struct ParsedHeader {
  nlohmann::json dom;                           // everything but the tensors' `data`
  std::vector<std::optional<TensorData>> data;  // by index in dom[list_key]; nullopt = no `data`
};

// Parses `json_text`; the objects of the array dom[list_key] are tensors whose `data` streams
// into ParsedHeader::data. `what` names the text in errors ("request", "response"); `body_size`
// bounds how many elements a shape may claim before only counting them.
Result<ParsedHeader> read_header(std::string_view json_text, const char* list_key, const char* what, size_t body_size,
                                 const DecodeLimits& limits, MemoryCharge* mem);

// The tensor for `spec` from what the reader collected: checks the element count and converts
// compact elements (range-checked for the datatype).
Result<Tensor> finish_data(TensorData&& d, const TensorSpec& spec, MemoryCharge* mem);

// ---- implementation: header-only because the fuzz targets compile the codec's .cpp files by name ----

namespace impl {

using json = nlohmann::json;

// Bytes one DOM value takes, as glibc allocates them: its slot in an array (16, twice that while
// the vector grows) or an object's map node (node, key and value: 96); an object's map and an
// array's vector add their own allocation; strings add their length. Charged before the value
// is added, so the limits hold before the memory is taken.
constexpr size_t kJsonArraySlotCost = 32;
constexpr size_t kJsonObjectEntryCost = 96;
constexpr size_t kJsonObjectCost = 64;
constexpr size_t kJsonArrayCost = 32;
constexpr size_t kMaxShapeRank = 16;  // a 'shape' longer than this is refused while it is read
// Compact buffer bytes per element (kind + 8 bytes); strings add their object and length.
constexpr size_t kCompactElementCost = 9;

inline Status too_many_elements(const std::string& label, int64_t limit) {
  return Status::InvalidArgument("input '{}': more than {} elements in one tensor (the limit per tensor)", label,
                                 limit);
}

inline double as_double(const Scalar& v) {
  if (v.kind == Scalar::kInt) return static_cast<double>(static_cast<int64_t>(v.bits));
  if (v.kind == Scalar::kUint) return static_cast<double>(v.bits);
  return std::bit_cast<double>(v.bits);
}

// Writes element i of a numeric tensor, refusing what the datatype cannot hold.
template <typename T>
inline Status store_at(void* base, int64_t i, const Scalar& v, const TensorSpec& spec) {
  T* dst = static_cast<T*>(base) + i;
  const std::string& name = spec.name;
  if constexpr (std::is_same_v<T, bool>) {
    if (v.kind != Scalar::kBool)
      return Status::InvalidArgument("input '{}': element {} is not a boolean (BOOL)", name, i);
    *dst = v.bits != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (v.kind == Scalar::kUint) {
      if (v.bits > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return Status::InvalidArgument("input '{}': element {} ({}) is out of range for {}", name, i, v.bits,
                                       spec.datatype);
      *dst = static_cast<T>(v.bits);
    } else if (v.kind == Scalar::kInt) {
      auto s = static_cast<int64_t>(v.bits);
      if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (s > 0 && static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
        return Status::InvalidArgument("input '{}': element {} ({}) is out of range for {}", name, i, s, spec.datatype);
      *dst = static_cast<T>(s);
    } else {
      return Status::InvalidArgument("input '{}': element {} is not an integer", name, i);
    }
  } else {
    if (v.kind != Scalar::kInt && v.kind != Scalar::kUint && v.kind != Scalar::kFloat)
      return Status::InvalidArgument("input '{}': element {} is not a number", name, i);
    double d = as_double(v);
    T t = from_f64<T>(d);
    // Beyond the finite range (1e300 as FP32, 70000 as FP16) would become inf.
    if (std::isinf(to_f64(t)))
      return Status::InvalidArgument("input '{}': element {} ({}) is out of range for {}", name, i, d, spec.datatype);
    *dst = t;
  }
  return Status::Ok();
}

using StoreFn = Status (*)(void*, int64_t, const Scalar&, const TensorSpec&);

inline StoreFn store_fn_for(DType dt) {
  return dispatch_dtype(dt, [](auto tag) -> StoreFn { return &store_at<decltype(tag)>; });
}

inline Status store_string(std::vector<std::string>& dst, int64_t i, Scalar::Kind kind, std::string* s,
                           const TensorSpec& spec) {
  if (kind != Scalar::kString || !s)
    return Status::InvalidArgument("input '{}': element {} is not a string (BYTES)", spec.name, i);
  dst[static_cast<size_t>(i)] = std::move(*s);
  return Status::Ok();
}

inline size_t tensor_bytes(DType dt, int64_t numel) {
  return static_cast<size_t>(numel) * (dt == DType::String ? sizeof(std::string) : dtype_size(dt));
}

// The nlohmann SAX handler (https://json.nlohmann.me/features/parsing/sax_interface/).
class Reader {
 public:
  Reader(const char* list_key, const char* what, size_t body_size, const DecodeLimits& limits, MemoryCharge* mem)
      : list_key_(list_key), what_(what), body_size_(body_size), limits_(limits), mem_(mem) {}

  bool null() { return in_data() ? element({Scalar::kNull, 0}, nullptr) : insert(json(nullptr), 0); }
  bool boolean(bool b) { return in_data() ? element({Scalar::kBool, b ? 1u : 0u}, nullptr) : insert(json(b), 0); }
  bool number_integer(int64_t v) {
    return in_data() ? element({Scalar::kInt, static_cast<uint64_t>(v)}, nullptr) : insert(json(v), 0);
  }
  bool number_unsigned(uint64_t v) { return in_data() ? element({Scalar::kUint, v}, nullptr) : insert(json(v), 0); }
  bool number_float(double v, const std::string&) {
    return in_data() ? element({Scalar::kFloat, std::bit_cast<uint64_t>(v)}, nullptr) : insert(json(v), 0);
  }
  bool string(std::string& s) {
    if (in_data()) return element({Scalar::kString, 0}, &s);
    size_t n = s.size();
    return insert(json(std::move(s)), n);
  }
  bool binary(json::binary_t&) { return fail(Status::InvalidArgument("{} JSON holds a binary value", what_)); }

  bool start_object(size_t) {
    if (!in_data()) return open(json::object());
    if (data_depth_ == 0 && !begin_data()) return false;
    return fail(Status::InvalidArgument("input '{}': 'data' holds an object (element {})", label_, cur_->count));
  }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    if (!in_data()) return open(json::array());
    if (data_depth_ == 0 && !begin_data()) return false;
    if (frames_.size() + data_depth_ + 1 > limits_.max_json_depth) return fail(too_deep());
    ++data_depth_;
    return true;
  }
  bool end_array() {
    if (data_depth_ == 0) {
      frames_.pop_back();
      return true;
    }
    if (--data_depth_ == 0) cur_ = nullptr;
    return true;
  }
  bool key(std::string& k) {
    const Frame& f = frames_.back();
    if (f.kind == Kind::kTensor && k == "data") {
      if (f.index < data_.size() && data_[f.index])
        return fail(Status::InvalidArgument("{} JSON has the key 'data' twice in one object", what_));
      data_next_ = true;
      return true;
    }
    if (f.node->contains(k))
      return fail(Status::InvalidArgument("{} JSON has the key '{}' twice in one object", what_, k));
    key_ = std::move(k);
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    std::string_view why = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    if (size_t p = why.find("] "); p != std::string_view::npos) why.remove_prefix(p + 2);
    if (status_.ok()) status_ = Status::InvalidArgument("{} body is not valid JSON: {}", what_, why);
    return false;
  }

  Status status() const { return status_; }
  ParsedHeader take() { return {std::move(dom_), std::move(data_)}; }

 private:
  enum class Kind { kRoot, kList, kTensor, kOutputs, kShape, kOther };
  struct Frame {
    json* node;
    Kind kind;
    size_t index;  // kTensor: position in the list
  };

  bool in_data() const { return data_depth_ > 0 || data_next_; }
  bool fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
    return false;
  }
  Status too_deep() const {
    return Status::InvalidArgument("{} JSON nests arrays/objects more than {} levels deep (the limit)", what_,
                                   limits_.max_json_depth);
  }

  // Adds a value to the DOM under the open container (or as the root); nullptr on failure.
  json* add(json v, size_t extra_bytes) {
    const bool keyed = !frames_.empty() && frames_.back().node->is_object();
    size_t cost = (keyed ? kJsonObjectEntryCost + key_.size() : kJsonArraySlotCost) + extra_bytes;
    if (v.is_object()) cost += kJsonObjectCost;
    if (v.is_array()) cost += kJsonArrayCost;
    // Everything but the tensors' data is a few names and numbers in any real request: its own,
    // tighter limit refuses a body of empty objects or arrays long before the per-request one.
    if (cost > limits_.max_structure_bytes || structure_bytes_ > limits_.max_structure_bytes - cost) {
      fail(Status::OutOfMemory("the {}'s JSON besides tensor data needs more than {} bytes of memory (the limit)",
                               what_, limits_.max_structure_bytes));
      return nullptr;
    }
    structure_bytes_ += cost;
    if (Status s = mem_->charge(cost); !s.ok()) {
      fail(std::move(s));
      return nullptr;
    }
    if (frames_.empty()) {
      dom_ = std::move(v);
      return &dom_;
    }
    Frame& top = frames_.back();
    if (top.node->is_array()) {
      if ((top.kind == Kind::kList || top.kind == Kind::kOutputs) && top.node->size() >= limits_.max_tensors) {
        fail(Status::InvalidArgument("{} has more than {} tensors in '{}' (the limit per request)", what_,
                                     limits_.max_tensors, top.kind == Kind::kList ? list_key_ : "outputs"));
        return nullptr;
      }
      if (top.kind == Kind::kShape && top.node->size() >= kMaxShapeRank) {
        fail(Status::InvalidArgument("{} has a 'shape' of more than {} dims (the limit)", what_, kMaxShapeRank));
        return nullptr;
      }
      top.node->push_back(std::move(v));
      return &top.node->back();
    }
    return &top.node->emplace(key_, std::move(v)).first.value();
  }
  bool insert(json v, size_t extra_bytes) { return add(std::move(v), extra_bytes) != nullptr; }

  bool open(json v) {
    if (frames_.size() + 1 > limits_.max_json_depth) return fail(too_deep());
    Kind kind = Kind::kOther;
    size_t index = 0;
    if (frames_.empty()) {
      if (v.is_object()) kind = Kind::kRoot;
    } else if (frames_.back().kind == Kind::kRoot && key_ == list_key_ && v.is_array()) {
      kind = Kind::kList;
    } else if (frames_.back().kind == Kind::kRoot && key_ == "outputs" && v.is_array()) {
      kind = Kind::kOutputs;
    } else if (frames_.back().kind == Kind::kTensor && key_ == "shape" && v.is_array()) {
      kind = Kind::kShape;
    } else if (frames_.back().kind == Kind::kList && v.is_object()) {
      kind = Kind::kTensor;
      index = frames_.back().node->size();
    }
    json* node = add(std::move(v), 0);
    if (!node) return false;
    frames_.push_back({node, kind, index});
    return true;
  }

  // At the value of a tensor's "data": typed when name, datatype and shape are already known.
  bool begin_data() {
    data_next_ = false;
    const Frame& f = frames_.back();
    if (data_.size() <= f.index) data_.resize(f.index + 1);
    cur_ = &data_[f.index].emplace();
    const json& obj = *f.node;
    auto name = obj.find("name");
    label_ = name != obj.end() && name->is_string() ? name->get<std::string>() : fmt::format("#{}", f.index);
    if (name == obj.end() || !obj.contains("datatype") || !obj.contains("shape")) {
      cur_->mode = TensorData::Mode::kCompact;
      return true;
    }
    auto spec = tensor_spec(obj);
    if (!spec.ok()) return fail(spec.status());
    spec_ = std::move(spec).value();
    // n elements take at least 2n-1 bytes of JSON: a larger shape cannot match, count only.
    if (static_cast<uint64_t>(spec_.numel) > body_size_ / 2 + 1) {
      cur_->mode = TensorData::Mode::kCountOnly;
      return true;
    }
    if (spec_.numel > limits_.max_elements_per_tensor)
      return fail(too_many_elements(spec_.name, limits_.max_elements_per_tensor));
    if (Status s = mem_->charge(tensor_bytes(spec_.dtype, spec_.numel)); !s.ok()) return fail(s);
    cur_->mode = TensorData::Mode::kTyped;
    cur_->tensor = Tensor::empty(spec_.dtype, spec_.shape);
    store_ = spec_.dtype == DType::String ? nullptr : store_fn_for(spec_.dtype);
    return true;
  }

  bool element(Scalar v, std::string* s) {
    const bool whole = data_depth_ == 0;  // "data": 5 is one element
    if (whole && !begin_data()) return false;
    bool ok = push(v, s);
    if (whole) cur_ = nullptr;
    return ok;
  }

  bool push(Scalar v, std::string* s) {
    TensorData& d = *cur_;
    const int64_t i = d.count++;
    switch (d.mode) {
      case TensorData::Mode::kCountOnly:
        return true;
      case TensorData::Mode::kTyped: {
        if (i >= d.tensor.numel()) return true;  // too many: finish_data reports the count
        if (s)
          if (Status st = mem_->charge(s->size()); !st.ok()) return fail(st);
        Status st =
            store_ ? store_(d.tensor.raw(), i, v, spec_) : store_string(d.tensor.strings(), i, v.kind, s, spec_);
        return st.ok() || fail(st);
      }
      case TensorData::Mode::kCompact: {
        if (i >= limits_.max_elements_per_tensor)
          return fail(too_many_elements(label_, limits_.max_elements_per_tensor));
        if (Status st = mem_->charge(kCompactElementCost + (s ? sizeof(std::string) + s->size() : 0)); !st.ok())
          return fail(st);
        if (s) {
          v.bits = d.strings.size();
          d.strings.push_back(std::move(*s));
        }
        d.kinds.push_back(v.kind);
        d.bits.push_back(v.bits);
        return true;
      }
    }
    return true;
  }

  const char* list_key_;
  size_t structure_bytes_ = 0;  // charged for the DOM (everything but the tensors' data)
  const char* what_;
  size_t body_size_;
  const DecodeLimits& limits_;
  MemoryCharge* mem_;
  Status status_;

  json dom_;
  std::vector<Frame> frames_;  // open containers of the DOM
  std::string key_;            // the last key read
  std::vector<std::optional<TensorData>> data_;

  bool data_next_ = false;  // the last key was a tensor's "data"
  size_t data_depth_ = 0;   // arrays open inside that `data`
  TensorData* cur_ = nullptr;
  TensorSpec spec_;  // of cur_ in typed mode
  StoreFn store_ = nullptr;
  std::string label_;  // the tensor's name for errors ("#2" before its name is known)
};

inline Result<int64_t> checked_numel(const Shape& s, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return Status::InvalidArgument("input '{}': shape is too large", name);
    n *= d;
  }
  return n;
}

}  // namespace impl

inline MemoryCharge::~MemoryCharge() {
  if (shared_ && reserved_) shared_->give_back(reserved_);
}

inline Status MemoryCharge::charge(size_t bytes) {
  if (bytes > limit_ || used_ > limit_ - bytes)
    return Status::OutOfMemory(
        "decoding the request needs more than {} bytes of memory (the limit per request, --max-request-memory)",
        limit_);
  used_ += bytes;
  if (shared_ && used_ > reserved_) {
    constexpr size_t kStep = size_t{1} << 20;  // few atomic operations per request
    size_t want = std::max(used_ - reserved_, kStep);
    if (!shared_->try_take(want))
      return Status::Unavailable(
          "server busy: requests in flight would pass the limit of {} bytes (--max-inflight-bytes); retry later",
          shared_->capacity());
    reserved_ += want;
  }
  return Status::Ok();
}

inline std::shared_ptr<void> MemoryCharge::hold() {
  if (!shared_ || !reserved_) return nullptr;
  size_t n = reserved_;
  reserved_ = 0;
  return shared_->adopt(n);
}

inline Result<TensorSpec> tensor_spec(const nlohmann::json& in) {
  if (!in.is_object()) return Status::InvalidArgument("each input must be an object");
  TensorSpec t;
  auto nit = in.find("name");
  if (nit == in.end() || !nit->is_string()) return Status::InvalidArgument("an input has no 'name'");
  t.name = nit->get<std::string>();
  auto dit = in.find("datatype");
  if (dit == in.end() || !dit->is_string()) return Status::InvalidArgument("input '{}' has no 'datatype'", t.name);
  t.datatype = dit->get<std::string>();
  auto dt = dtype_from_kserve(t.datatype);
  if (!dt) return Status::InvalidArgument("input '{}': unknown datatype '{}'", t.name, t.datatype);
  t.dtype = *dt;
  auto sit = in.find("shape");
  if (sit == in.end() || !sit->is_array()) return Status::InvalidArgument("input '{}' has no 'shape' array", t.name);
  for (const auto& d : *sit) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return Status::InvalidArgument("input '{}': shape entries must be non-negative integers", t.name);
    t.shape.push_back(d.get<int64_t>());
  }
  if (t.shape.size() > 16) return Status::InvalidArgument("input '{}': rank {} is too large", t.name, t.shape.size());
  GPUOPT_ASSIGN_OR_RETURN(t.numel, impl::checked_numel(t.shape, t.name));
  return t;
}

inline Result<ParsedHeader> read_header(std::string_view json_text, const char* list_key, const char* what,
                                        size_t body_size, const DecodeLimits& limits, MemoryCharge* mem) {
  impl::Reader r(list_key, what, body_size, limits, mem);
  bool ok = nlohmann::json::sax_parse(json_text.begin(), json_text.end(), &r);
  if (!ok || !r.status().ok()) {
    if (!r.status().ok()) return r.status();
    return Status::InvalidArgument("{} body is not valid JSON", what);
  }
  return r.take();
}

inline Result<Tensor> finish_data(TensorData&& d, const TensorSpec& spec, MemoryCharge* mem) {
  if (d.count != spec.numel)
    return Status::InvalidArgument("input '{}': shape {} needs {} elements but 'data' has {}", spec.name,
                                   shape_to_string(spec.shape), spec.numel, d.count);
  if (d.mode == TensorData::Mode::kTyped) return std::move(d.tensor);
  if (d.mode == TensorData::Mode::kCountOnly)  // unreachable: such a shape never matches the count
    return Status::Internal("input '{}': elements were counted but not kept", spec.name);
  GPUOPT_RETURN_IF_ERROR(mem->charge(impl::tensor_bytes(spec.dtype, spec.numel)));
  Tensor t = Tensor::empty(spec.dtype, spec.shape);
  impl::StoreFn store = spec.dtype == DType::String ? nullptr : impl::store_fn_for(spec.dtype);
  for (int64_t i = 0; i < spec.numel; ++i) {
    Scalar v{static_cast<Scalar::Kind>(d.kinds[static_cast<size_t>(i)]), d.bits[static_cast<size_t>(i)]};
    std::string* s = v.kind == Scalar::kString ? &d.strings[v.bits] : nullptr;
    GPUOPT_RETURN_IF_ERROR(store ? store(t.raw(), i, v, spec) : impl::store_string(t.strings(), i, v.kind, s, spec));
  }
  return t;
}

}  // namespace gpuopt::server::detail
