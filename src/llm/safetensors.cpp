// The safetensors reader: mmap plus a header that is checked entry by entry, so a truncated file
// or a header lying about offsets fails at open with the file and tensor named, never as a read
// past the mapping later.
#include "llm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpuopt::llm {
namespace {

using nlohmann::json;

// The format's own limit on the header (safetensors refuses larger ones).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct StDType {
  const char* name;
  size_t size;
  DType dtype;  // Undefined: no gpuopt DType (the loader refuses it if a model needs it)
};
constexpr StDType kStDTypes[] = {
    {"F64", 8, DType::F64},
    {"F32", 4, DType::F32},
    {"F16", 2, DType::F16},
    {"BF16", 2, DType::BF16},
    {"I64", 8, DType::I64},
    {"I32", 4, DType::I32},
    {"I16", 2, DType::I16},
    {"I8", 1, DType::I8},
    {"U8", 1, DType::U8},
    {"U16", 2, DType::U16},
    {"U32", 4, DType::U32},
    {"U64", 8, DType::U64},
    {"BOOL", 1, DType::Bool},
    {"F8_E4M3", 1, DType::Undefined},
    {"F8_E5M2", 1, DType::Undefined},
    {"F8_E8M0", 1, DType::Undefined},
};

const StDType* find_dtype(const std::string& s) {
  for (const StDType& d : kStDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

}  // namespace

Result<std::vector<WeightView>> parse_safetensors_header(const std::string& header, size_t data_bytes,
                                                         const unsigned char* base, const std::string& where) {
  json j = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("{}: the safetensors header is not a JSON object", where);
  std::vector<WeightView> out;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& e = it.value();
    const std::string w = fmt::format("{}: tensor '{}'", where, name);
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return Status::InvalidArgument("{}: the header entry needs dtype, shape and data_offsets", w);
    if (!e.at("dtype").is_string()) return Status::InvalidArgument("{}: dtype is not a string", w);
    const StDType* dt = find_dtype(e.at("dtype").get<std::string>());
    if (!dt) return Status::InvalidArgument("{}: unknown dtype {}", w, e.at("dtype").dump());
    WeightView v;
    v.name = name;
    v.dtype = dt->dtype;
    v.file_dtype = dt->name;
    const json& shape = e.at("shape");
    if (!shape.is_array()) return Status::InvalidArgument("{}: shape is not a list", w);
    uint64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned())
        return Status::InvalidArgument("{}: shape {} is not a list of sizes", w, shape.dump());
      const uint64_t x = d.get<uint64_t>();
      if (x != 0 && numel > (uint64_t{1} << 62) / x)
        return Status::InvalidArgument("{}: shape {} is too large", w, shape.dump());
      numel *= x;
      v.shape.push_back(static_cast<int64_t>(x));
    }
    const json& off = e.at("data_offsets");
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Status::InvalidArgument("{}: data_offsets {} is not [begin, end]", w, off.dump());
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
      return Status::InvalidArgument("{}: data_offsets [{}, {}] lie outside the file's {} data bytes", w, begin, end,
                                     data_bytes);
    if (numel > (uint64_t{1} << 62) / dt->size || end - begin != numel * dt->size)
      return Status::InvalidArgument("{}: data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", w, begin, end,
                                     end - begin, dt->name, shape.dump(), numel * dt->size);
    v.bytes = static_cast<size_t>(end - begin);
    v.data = base ? base + begin : nullptr;
    ranges.push_back({begin, end, out.size()});
    out.push_back(std::move(v));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end)
      return Status::InvalidArgument("{}: tensors '{}' and '{}' overlap (bytes {}..{} and {}..{})", where,
                                     out[ranges[i - 1].index].name, out[ranges[i].index].name, ranges[i - 1].begin,
                                     ranges[i - 1].end, ranges[i].begin, ranges[i].end);
  }
  std::sort(out.begin(), out.end(), [](const WeightView& a, const WeightView& b) { return a.name < b.name; });
  return out;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string where = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("'{}' does not exist", where);
    return Status::InvalidArgument("'{}' cannot be opened: {}", where, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("'{}' is not a regular file", where);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::InvalidArgument("{}: {} bytes is too short for a safetensors file (truncated?)", where, size);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) return Status::Internal("{}: mmap failed: {}", where, std::strerror(errno));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->size_ = size;
  const auto* bytes = static_cast<const unsigned char*>(map);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeaderBytes || n > size - 8)
    return Status::InvalidArgument("{}: the header claims {} bytes but the file has {} after the length (truncated?)",
                                   where, n, size - 8);
  const std::string header(reinterpret_cast<const char*>(bytes + 8), static_cast<size_t>(n));
  GPUOPT_ASSIGN_OR_RETURN(f->tensors_, parse_safetensors_header(header, size - 8 - n, bytes + 8 + n, where));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const WeightView* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const WeightView& w, const std::string& n) { return w.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace gpuopt::llm
