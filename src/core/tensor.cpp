#include "core/tensor.h"

#include "core/dispatch.h"

#include <cstdlib>
#include <cstring>

namespace gpuopt {

std::string Device::to_string() const {
  return kind == DeviceKind::kCpu ? "cpu" : fmt::format("cuda:{}", index);
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  GPUOPT_ASSERT(t.numel_ >= 0, "Tensor::empty with non-concrete shape {}", shape_to_string(t.shape_));
  t.storage_ = std::make_shared<Storage>();
  if (dtype == DType::String) {
    t.storage_->strings.resize(static_cast<size_t>(t.numel_));
    return t;
  }
  const size_t bytes = t.nbytes();
  const size_t alloc = ((bytes + 63) / 64) * 64;
  t.storage_->bytes = bytes;
  if (alloc) {
    t.storage_->data = std::aligned_alloc(64, alloc);
    GPUOPT_ASSERT(t.storage_->data != nullptr, "host allocation of {} bytes failed", alloc);
    t.storage_->deleter = [](void* p) { std::free(p); };
  }
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  if (t.raw()) std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, void* data, Device device) {
  auto st = std::make_shared<Storage>();
  st->data = data;
  st->device = device;
  Tensor t = wrap(dtype, std::move(shape), std::move(st));
  t.storage_->bytes = t.nbytes();
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, std::shared_ptr<Storage> storage, size_t offset) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.storage_ = std::move(storage);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::scalar_f32(float v) {
  Tensor t = empty(DType::F32, {});
  *t.data<float>() = v;
  return t;
}

Tensor Tensor::scalar_i64(int64_t v) {
  Tensor t = empty(DType::I64, {});
  *t.data<int64_t>() = v;
  return t;
}

Result<Tensor> Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel_)
    return Status::InvalidArgument("cannot reshape {} to {}", describe(), shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  GPUOPT_ASSERT(is_cpu(), "clone() of a device tensor");
  Tensor t = empty(dtype_, shape_);
  if (dtype_ == DType::String) t.strings() = strings();
  else if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

double Tensor::get_f64(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return to_f64(data<T>()[i]);
  });
}

int64_t Tensor::get_i64(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(data<T>()[i]);
    else return static_cast<int64_t>(to_f64(data<T>()[i]));
  });
}

void Tensor::set_f64(int64_t i, double v) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[i] = from_f64<T>(v);
  });
}

Tensor Tensor::cast(DType to) const {
  Tensor out = empty(to, shape_);
  dispatch_dtype(dtype_, [&](auto stag) {
    using S = decltype(stag);
    dispatch_dtype(to, [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = data<S>();
      D* d = out.data<D>();
      for (int64_t i = 0; i < numel_; ++i) {
        if constexpr (std::is_integral_v<S> && std::is_integral_v<D>) d[i] = static_cast<D>(s[i]);
        else d[i] = from_f64<D>(to_f64(s[i]));
      }
    });
  });
  return out;
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_i64(i);
  return v;
}

std::string Tensor::describe() const { return fmt::format("{}{}", dtype_name(dtype_), shape_to_string(shape_)); }

}  // namespace gpuopt
