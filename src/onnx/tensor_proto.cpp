// TensorProto -> Tensor: raw_data, typed fields and external data files.
#include "core/narrow_dtype.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

namespace gpuopt {
namespace {

namespace fs = std::filesystem;

// Bytes of the external file named by `location`, read from offset/length. The location must
// stay inside the model folder: a model must not make the loader read arbitrary files.
Result<std::string> read_external(const onnx::TensorProto& p, const std::string& model_dir, const std::string& what,
                                  size_t expected_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      return Status::InvalidArgument("{}: external_data '{}' is not a number: '{}'", what, kv.key(), kv.value());
    }
  }
  if (location.empty()) return Status::InvalidArgument("{}: external data without a 'location'", what);
  if (model_dir.empty())
    return Status::InvalidArgument("{}: uses external data file '{}' but the model was not loaded from a file", what,
                                   location);
  const fs::path rel(location);
  if (rel.is_absolute()) return Status::InvalidArgument("{}: external data location '{}' must be relative", what, location);
  for (const auto& part : rel)
    if (part == "..")
      return Status::InvalidArgument("{}: external data location '{}' leaves the model folder", what, location);
  const fs::path path = fs::path(model_dir) / rel;
  std::error_code ec;
  // A symlink inside the folder may point anywhere: the file's real path must stay inside the
  // model folder's real path, and it must be a regular file (a device, FIFO or socket could
  // hang the load or feed it without end).
  const fs::path real = fs::canonical(path, ec);
  if (ec) return Status::NotFound("{}: external data file '{}' cannot be read: {}", what, path.string(), ec.message());
  const fs::path real_dir = fs::canonical(model_dir, ec);
  if (ec) return Status::NotFound("{}: model folder '{}' cannot be read: {}", what, model_dir, ec.message());
  const auto [dir_end, real_it] = std::mismatch(real_dir.begin(), real_dir.end(), real.begin(), real.end());
  if (dir_end != real_dir.end() || real_it == real.end())
    return Status::InvalidArgument("{}: external data location '{}' resolves to '{}', outside the model folder '{}'",
                                   what, location, real.string(), real_dir.string());
  if (!fs::is_regular_file(real, ec))
    return Status::InvalidArgument("{}: external data '{}' is not a regular file (a device, FIFO or socket?)", what,
                                   path.string());
  const auto file_size = fs::file_size(real, ec);
  if (ec) return Status::NotFound("{}: external data file '{}' cannot be read: {}", what, path.string(), ec.message());
  if (offset < 0 || static_cast<uint64_t>(offset) > file_size)
    return Status::InvalidArgument("{}: external data offset {} is past the end of '{}' ({} bytes)", what, offset,
                                   path.string(), file_size);
  const uint64_t avail = file_size - static_cast<uint64_t>(offset);
  const uint64_t want = length >= 0 ? static_cast<uint64_t>(length) : static_cast<uint64_t>(expected_bytes);
  if (want != expected_bytes)
    return Status::InvalidArgument("{}: external data length {} does not match the tensor's {} bytes", what, want,
                                   expected_bytes);
  if (want > avail)
    return Status::InvalidArgument("{}: external data '{}' has {} bytes after offset {}, need {} (truncated file?)",
                                   what, path.string(), avail, offset, want);
  std::ifstream f(real, std::ios::binary);
  std::string bytes(want, '\0');
  f.seekg(offset);
  f.read(bytes.data(), static_cast<std::streamsize>(want));
  if (!f) return Status::InvalidArgument("{}: reading {} bytes from '{}' failed", what, want, path.string());
  return bytes;
}

template <typename Field, typename Store>
Status copy_typed(const Field& field, int64_t numel, const std::string& what, const char* field_name, Store store) {
  if (static_cast<int64_t>(field.size()) != numel)
    return Status::InvalidArgument("{}: {} has {} values, the shape needs {}", what, field_name, field.size(), numel);
  for (int64_t i = 0; i < numel; ++i) store(i, field.Get(static_cast<int>(i)));
  return Status::Ok();
}

}  // namespace

std::string onnx_dtype_name(int t) {
  if (onnx::TensorProto_DataType_IsValid(t)) return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return fmt::format("unknown({})", t);
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& model_dir, const std::string& what) {
  const std::optional<DType> dt = dtype_from_onnx(p.data_type());
  if (!dt || *dt == DType::Undefined)
    return Status::Unimplemented("{}: unsupported dtype {}", what, onnx_dtype_name(p.data_type()));
  if (p.has_segment()) return Status::Unimplemented("{}: segmented tensors are not supported", what);
  Shape shape;
  int64_t numel = 1;
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  for (int64_t d : p.dims()) {
    if (d < 0) return Status::InvalidArgument("{}: negative dimension {}", what, d);
    shape.push_back(d);
    if (d != 0 && numel > kMaxElements / d) return Status::InvalidArgument("{}: shape is too large", what);
    numel *= d;
  }
  const DType dtype = *dt;
  const size_t esize = dtype_size(dtype);
  const bool narrow = dtype_is_narrow(dtype);
  // Bytes in the file: sub-byte types are packed there (unpacked in memory).
  const size_t nbytes = narrow ? narrow_packed_bytes(dtype, numel) : static_cast<size_t>(numel) * esize;

  if (dtype == DType::String) {
    if (p.data_location() == onnx::TensorProto::EXTERNAL)
      return Status::Unimplemented("{}: string tensors in external data are not supported", what);
    if (numel > p.string_data_size())
      return Status::InvalidArgument("{}: string{} needs {} values, string_data holds {}", what,
                                     shape_to_string(shape), numel, p.string_data_size());
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dtype, shape, what));
    GPUOPT_RETURN_IF_ERROR(copy_typed(p.string_data(), numel, what, "string_data",
                                      [&](int64_t i, const std::string& s) { t.strings()[static_cast<size_t>(i)] = s; }));
    return t;
  }

  const std::string* raw = nullptr;
  std::string external;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    GPUOPT_ASSIGN_OR_RETURN(external, read_external(p, model_dir, what, nbytes));
    raw = &external;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }
  if (raw) {
    if (raw->size() != nbytes)
      return Status::InvalidArgument("{}: raw_data has {} bytes, {}{} needs {}", what, raw->size(), dtype_name(dtype),
                                     shape_to_string(shape), nbytes);
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dtype, shape, what));
    if (narrow) narrow_unpack(dtype, reinterpret_cast<const uint8_t*>(raw->data()), numel, t.data<uint8_t>());
    else if (nbytes) std::memcpy(t.raw(), raw->data(), nbytes);  // ONNX raw data is little-endian, like the host
    return t;
  }
  if (narrow) {
    // int32_data holds one element per value for 8-bit types, the packed bytes for sub-byte ones.
    if (static_cast<size_t>(p.int32_data_size()) != nbytes)
      return Status::InvalidArgument("{}: int32_data has {} values, {}{} needs {}", what, p.int32_data_size(),
                                     dtype_name(dtype), shape_to_string(shape), nbytes);
    std::string bytes(nbytes, '\0');
    for (size_t i = 0; i < nbytes; ++i) bytes[i] = static_cast<char>(p.int32_data(static_cast<int>(i)) & 0xFF);
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dtype, shape, what));
    narrow_unpack(dtype, reinterpret_cast<const uint8_t*>(bytes.data()), numel, t.data<uint8_t>());
    return t;
  }

  // Typed fields. Small ints, bool, f16 and bf16 live in int32_data (the latter two as bits).
  const bool no_data = p.float_data_size() == 0 && p.int32_data_size() == 0 && p.int64_data_size() == 0 &&
                       p.double_data_size() == 0 && p.uint64_data_size() == 0;
  if (no_data && numel > 0) return Status::InvalidArgument("{}: {}{} has no data", what, dtype_name(dtype), shape_to_string(shape));
  // Before allocating: a corrupt dims field must not ask for gigabytes that the data cannot fill.
  const int64_t given = std::max({p.float_data_size(), p.int32_data_size(), p.int64_data_size(),
                                  p.double_data_size(), p.uint64_data_size()});
  if (numel > given)
    return Status::InvalidArgument("{}: {}{} needs {} values, the typed data fields hold at most {}", what,
                                   dtype_name(dtype), shape_to_string(shape), numel, given);
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(dtype, shape, what));
  if (numel == 0) return t;
  Status st;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* d = t.data<T>();
    if constexpr (std::is_same_v<T, float>) {
      st = copy_typed(p.float_data(), numel, what, "float_data", [&](int64_t i, float v) { d[i] = v; });
    } else if constexpr (std::is_same_v<T, double>) {
      st = copy_typed(p.double_data(), numel, what, "double_data", [&](int64_t i, double v) { d[i] = v; });
    } else if constexpr (std::is_same_v<T, int64_t>) {
      st = copy_typed(p.int64_data(), numel, what, "int64_data", [&](int64_t i, int64_t v) { d[i] = v; });
    } else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
      st = copy_typed(p.uint64_data(), numel, what, "uint64_data", [&](int64_t i, uint64_t v) { d[i] = static_cast<T>(v); });
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      st = copy_typed(p.int32_data(), numel, what, "int32_data",
                      [&](int64_t i, int32_t v) { d[i].bits = static_cast<uint16_t>(v); });
    } else if constexpr (std::is_same_v<T, bool>) {
      st = copy_typed(p.int32_data(), numel, what, "int32_data", [&](int64_t i, int32_t v) { d[i] = v != 0; });
    } else {
      st = copy_typed(p.int32_data(), numel, what, "int32_data", [&](int64_t i, int32_t v) { d[i] = static_cast<T>(v); });
    }
  });
  GPUOPT_RETURN_IF_ERROR(st);
  return t;
}

Result<Tensor> load_tensor_pb(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("tensor file '{}' cannot be opened", path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes))
    return Status::InvalidArgument("'{}' is not a serialized ONNX TensorProto (truncated or corrupt)", path);
  const std::string dir = fs::path(path).parent_path().string();
  return tensor_from_proto(p, dir.empty() ? "." : dir, fmt::format("tensor '{}'", path));
}

}  // namespace gpuopt
