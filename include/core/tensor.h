// Tensor: dtype + shape + shared storage (host or device). Copies share storage; clone() copies.
//
//   Tensor t = Tensor::empty(DType::F32, {2, 3});
//   float* p = t.data<float>();
#pragma once

#include "core/dispatch.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

enum class DeviceKind : uint8_t { kCpu, kCuda };

// A typed device id: the CPU, or CUDA device `index` ("cuda" is cuda:0). Text from users goes
// through parse_device (core/device.h) once, at the edge; inside, devices travel as this type.
// A string literal converts for code and tests (`{.device = "cuda:1"}`); a literal that is not a
// device is a programmer error and aborts.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  constexpr Device() = default;
  constexpr Device(DeviceKind k, int i = 0) : kind(k), index(i) {}
  Device(const char* literal);  // NOLINT(google-explicit-constructor): literals only, see above
  static constexpr Device cpu() { return Device{}; }
  static constexpr Device cuda(int i = 0) { return Device{DeviceKind::kCuda, i}; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu" or "cuda:N"
};

// A block of memory and how to free it. String tensors keep their elements in `strings`.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device;
  std::function<void(void*)> deleter;
  std::vector<std::string> strings;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (deleter && data) deleter(data);
  }
};

// Physical memory of this host (the cap on any one tensor when no --memory-limit is set).
size_t physical_memory_bytes();
// Checks that a tensor of `dtype` and `shape` can exist in `limit` bytes (0: physical memory):
// OK for a shape with unknown dims; InvalidArgument "f32 [2^40,2^40] needs 4.84e+24 bytes, more
// than a 64-bit size can count" when its size overflows; OutOfMemory
// "f32 [1000000000000,3] needs 10.92 TiB, more than the 23.47 GiB of physical memory" otherwise.
Status check_tensor_size(DType dtype, const Shape& shape, size_t limit);

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised host tensor (64-byte aligned). Aborts if the allocation fails: for sizes the
  // program chose; sizes that come from a model or a request go through try_empty.
  static Tensor empty(DType dtype, Shape shape);
  // Same, but an allocation that fails (or whose size overflows) is an out-of-memory Status
  // naming `what`: "out of memory allocating 'relu:0' (f32 [1000000,3]): 11.44 MiB requested on the host".
  static Result<Tensor> try_empty(DType dtype, Shape shape, std::string_view what);
  static Tensor zeros(DType dtype, Shape shape);
  // Host tensor that borrows `data` without owning it (caller keeps it alive).
  static Tensor borrow(DType dtype, Shape shape, void* data, Device device = {});
  // Tensor over storage the caller allocated (device memory from a backend allocator, say).
  static Tensor wrap(DType dtype, Shape shape, std::shared_ptr<Storage> storage, size_t offset = 0);
  template <typename T>
  static Tensor from_vector(DType dtype, Shape shape, const std::vector<T>& values);
  static Tensor scalar_f32(float v);
  static Tensor scalar_i64(int64_t v);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  Device device() const { return storage_ ? storage_->device : Device{}; }
  bool is_cpu() const { return device().kind == DeviceKind::kCpu; }

  void* raw() { return storage_ ? static_cast<char*>(storage_->data) + offset_ : nullptr; }
  const void* raw() const { return storage_ ? static_cast<const char*>(storage_->data) + offset_ : nullptr; }
  template <typename T>
  T* data() { return static_cast<T*>(raw()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw()); }
  std::vector<std::string>& strings() { return storage_->strings; }
  const std::vector<std::string>& strings() const { return storage_->strings; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset() const { return offset_; }

  // Same storage, new shape with the same element count.
  Result<Tensor> reshaped(Shape shape) const;
  // Deep copy on the host.
  Tensor clone() const;
  // Element i converted to double / int64 (host only; for tests, folding and printing).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);
  // Converted copy (host). Float->int truncates toward zero like a C cast; ->Bool is != 0.
  Tensor cast(DType to) const;
  // Values of a 0-d/1-d integer tensor (shape inputs such as Reshape's shape).
  std::vector<int64_t> to_i64_vector() const;
  std::string describe() const;  // "f32[2,3]"

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
};

template <typename T>
Tensor Tensor::from_vector(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = empty(dtype, std::move(shape));
  GPUOPT_ASSERT(static_cast<int64_t>(values.size()) == t.numel(), "from_vector: {} values for {}", values.size(), t.describe());
  dispatch_dtype(dtype, [&](auto tag) {
    using D = decltype(tag);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<D> && std::is_integral_v<T>) t.data<D>()[i] = static_cast<D>(values[i]);
      else t.data<D>()[i] = from_f64<D>(static_cast<double>(values[i]));
    }
  });
  return t;
}

}  // namespace gpuopt
