#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace gpuopt {
namespace {

std::optional<DType> dtype_from_descr(const std::string& d) {
  static constexpr std::pair<std::string_view, DType> kMap[] = {
      {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"|i1", DType::I8},
      {"|u1", DType::U8},  {"<i2", DType::I16}, {"<u2", DType::U16}, {"<i4", DType::I32},
      {"<u4", DType::U32}, {"<i8", DType::I64}, {"<u8", DType::U64}, {"|b1", DType::Bool},
      {"<i1", DType::I8},  {"<u1", DType::U8},  {"|f2", DType::F16}};
  for (auto& [k, t] : kMap)
    if (d == k) return t;
  return std::nullopt;
}

std::string descr_of(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::I16: return "<i2";
    case DType::U16: return "<u2";
    case DType::BF16: return "<u2";  // raw bits; NumPy has no bfloat16
    case DType::I32: return "<i4";
    case DType::U32: return "<u4";
    case DType::I64: return "<i8";
    case DType::U64: return "<u8";
    case DType::Bool: return "|b1";
    default: return "";
  }
}

// Value of `'key': <value>` in the header dict, up to the next top-level comma or brace.
std::optional<std::string> dict_value(const std::string& h, const std::string& key) {
  const std::string k = "'" + key + "'";
  size_t p = h.find(k);
  if (p == std::string::npos) return std::nullopt;
  p = h.find(':', p + k.size());
  if (p == std::string::npos) return std::nullopt;
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  if (p >= h.size()) return std::nullopt;
  if (h[p] == '\'') {
    size_t e = h.find('\'', p + 1);
    if (e == std::string::npos) return std::nullopt;
    return h.substr(p + 1, e - p - 1);
  }
  if (h[p] == '(') {
    size_t e = h.find(')', p);
    if (e == std::string::npos) return std::nullopt;
    return h.substr(p, e - p + 1);
  }
  size_t e = h.find_first_of(",}", p);
  if (e == std::string::npos) return std::nullopt;
  return h.substr(p, e - p);
}

}  // namespace

Result<Tensor> parse_npy(const void* data, size_t size, const std::string& what) {
  const auto* b = static_cast<const unsigned char*>(data);
  if (size < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0)
    return Status::InvalidArgument("{}: not a .npy file (missing \\x93NUMPY magic)", what);
  const int major = b[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = b[8] | (b[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return Status::InvalidArgument("{}: truncated .npy header", what);
    header_len = b[8] | (b[9] << 8) | (b[10] << 16) | (static_cast<size_t>(b[11]) << 24);
    header_start = 12;
  } else {
    return Status::InvalidArgument("{}: unsupported .npy version {}", what, major);
  }
  if (header_start + header_len > size) return Status::InvalidArgument("{}: truncated .npy header", what);
  const std::string h(reinterpret_cast<const char*>(b + header_start), header_len);
  auto descr = dict_value(h, "descr");
  auto fortran = dict_value(h, "fortran_order");
  auto shape_s = dict_value(h, "shape");
  if (!descr || !fortran || !shape_s) return Status::InvalidArgument("{}: malformed .npy header '{}'", what, h);
  if (fortran->find("True") != std::string::npos)
    return Status::Unimplemented("{}: Fortran-order .npy arrays are not supported (save with np.ascontiguousarray)", what);
  auto dt = dtype_from_descr(*descr);
  if (!dt) return Status::Unimplemented("{}: .npy dtype '{}' is not supported", what, *descr);
  Shape shape;
  std::string dims = shape_s->substr(1, shape_s->size() - 2);
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    char* end = nullptr;
    long long v = std::strtoll(item.c_str() + a, &end, 10);
    if (v < 0) return Status::InvalidArgument("{}: negative dimension in .npy shape {}", what, *shape_s);
    shape.push_back(v);
  }
  // Checked before allocating: a header's shape must not ask for more than the file holds.
  const size_t off = header_start + header_len;
  const std::optional<uint64_t> need = checked_nbytes(shape, dtype_size(*dt));
  if (!need || size - off < *need)
    return Status::InvalidArgument("{}: .npy data is {} bytes, {}{} needs {}", what, size - off, dtype_name(*dt),
                                   shape_to_string(shape), need ? fmt::format("{}", *need) : std::string("more than 2^64"));
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(*dt, shape, what));
  if (t.nbytes()) std::memcpy(t.raw(), b + off, t.nbytes());
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("cannot open '{}'", path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_npy(bytes.data(), bytes.size(), path);
}

std::string serialize_npy(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += fmt::format("{},", t.shape()[i]);
  if (t.shape().size() > 1) shape.pop_back();
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(t.dtype()), shape);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) {
  if (!t.is_cpu()) return Status::InvalidArgument("write_npy: tensor is on {}", t.device().to_string());
  if (descr_of(t.dtype()).empty()) return Status::Unimplemented("write_npy: dtype {} has no .npy form", dtype_name(t.dtype()));
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("cannot write '{}'", path);
  const std::string bytes = serialize_npy(t);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return Status::Internal("short write to '{}'", path);
  return Status::Ok();
}

}  // namespace gpuopt
