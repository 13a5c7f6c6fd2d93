// One `.safetensors` file, memory-mapped and validated (the format: 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the end of the header).
//
//   GPUOPT_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open("model.safetensors"));
//   for (const WeightView& w : f->tensors()) ...
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/checkpoint.h"

namespace gpuopt::llm {

class SafetensorsFile {
 public:
  // Checks the header (size, JSON, every entry's dtype, shape, offsets inside the file, byte count
  // = elements x dtype size, no two tensors overlapping). Tensors of dtypes a model never stores
  // its weights in (integers, bool) keep DType::Undefined when unknown to gpuopt; the loader
  // refuses them only if a model needs them.
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<WeightView>& tensors() const { return tensors_; }
  const WeightView* find(const std::string& name) const;
  size_t file_bytes() const { return size_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<WeightView> tensors_;  // sorted by name
};

// Parses a header alone (the tests and the fuzzer feed it bytes); `data_bytes` is what follows
// the header in the file, `base` the address of that data.
Result<std::vector<WeightView>> parse_safetensors_header(const std::string& header, size_t data_bytes,
                                                         const unsigned char* base, const std::string& where);

}  // namespace gpuopt::llm
