#include "core/tensor.h"

#include "core/dispatch.h"
#include "core/narrow_dtype.h"
#include "core/table.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include <unistd.h>

namespace gpuopt {

std::string Device::to_string() const {
  if (kind == DeviceKind::kCpu) return index == 1 ? "cpu-ref" : "cpu";  // index 1: kCpuReference (core/device.h)
  return fmt::format("cuda:{}", index);
}

size_t physical_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
  }();
  return bytes;
}

namespace {
// Bytes a host tensor takes: string tensors hold one std::string per element.
size_t host_elem_size(DType dtype) { return dtype == DType::String ? sizeof(std::string) : dtype_size(dtype); }
}  // namespace

Status check_tensor_size(DType dtype, const Shape& shape, size_t limit) {
  if (!shape_is_concrete(shape)) return Status::Ok();
  const std::optional<uint64_t> bytes = checked_nbytes(shape, host_elem_size(dtype));
  if (!bytes) {
    double approx = static_cast<double>(host_elem_size(dtype));
    for (int64_t d : shape) approx *= static_cast<double>(d);
    return Status::InvalidArgument("{} {} needs {:.3g} bytes, more than a 64-bit size can count", dtype_name(dtype),
                                   shape_to_string(shape), approx);
  }
  const size_t cap = limit ? limit : physical_memory_bytes();
  if (*bytes <= cap) return Status::Ok();
  return Status::OutOfMemory("{} {} needs {}, more than {}", dtype_name(dtype), shape_to_string(shape),
                             format_bytes(static_cast<double>(*bytes)),
                             limit ? fmt::format("--memory-limit {}", format_bytes(static_cast<double>(limit)))
                                   : fmt::format("the {} of physical memory", format_bytes(static_cast<double>(cap))));
}

Result<Tensor> Tensor::try_empty(DType dtype, Shape shape, std::string_view what) {
  auto oom = [&](const Shape& s, uint64_t bytes) {
    return Status::OutOfMemory("out of memory allocating '{}' ({} {}): {} requested on the host", what, dtype_name(dtype),
                               shape_to_string(s), format_bytes(static_cast<double>(bytes)));
  };
  if (!shape_is_concrete(shape))
    return Status::Internal("allocating '{}' with non-concrete shape {}", what, shape_to_string(shape));
  const std::optional<uint64_t> bytes = checked_nbytes(shape, host_elem_size(dtype));
  if (!bytes || *bytes > SIZE_MAX - 64) return oom(shape, bytes ? *bytes : UINT64_MAX);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.storage_ = std::make_shared<Storage>();
  if (dtype == DType::String) {
    try {
      t.storage_->strings.resize(static_cast<size_t>(t.numel_));
    } catch (const std::bad_alloc&) {
      return oom(t.shape_, *bytes);
    } catch (const std::length_error&) {
      return oom(t.shape_, *bytes);
    }
    return t;
  }
  const size_t n = t.nbytes();
  const size_t alloc = ((n + 63) / 64) * 64;
  t.storage_->bytes = n;
  if (alloc) {
    t.storage_->data = std::aligned_alloc(64, alloc);
    if (!t.storage_->data) return oom(t.shape_, n);
    t.storage_->deleter = [](void* p) { std::free(p); };
  }
  return t;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  GPUOPT_ASSERT(shape_is_concrete(shape), "Tensor::empty with non-concrete shape {}", shape_to_string(shape));
  Result<Tensor> t = try_empty(dtype, std::move(shape), "tensor");
  GPUOPT_ASSERT(t.ok(), "{}", t.status().message());
  return std::move(*t);
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
  if (dtype_is_narrow(dtype_)) return narrow_to_f64(dtype_, data<uint8_t>()[i]);
  return dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return to_f64(data<T>()[i]);
  });
}

int64_t Tensor::get_i64(int64_t i) const {
  if (dtype_is_narrow(dtype_)) {
    const double v = get_f64(i);
    return std::isfinite(v) ? static_cast<int64_t>(v) : 0;
  }
  return dispatch_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(data<T>()[i]);
    else return static_cast<int64_t>(to_f64(data<T>()[i]));
  });
}

void Tensor::set_f64(int64_t i, double v) {
  if (dtype_is_narrow(dtype_)) {
    data<uint8_t>()[i] = narrow_from_f64(dtype_, v);
    return;
  }
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[i] = from_f64<T>(v);
  });
}

Tensor Tensor::cast(DType to) const {
  Tensor out = empty(to, shape_);
  if (dtype_is_narrow(dtype_) || dtype_is_narrow(to)) {
    for (int64_t i = 0; i < numel_; ++i) out.set_f64(i, get_f64(i));
    return out;
  }
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
