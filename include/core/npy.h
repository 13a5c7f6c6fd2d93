// NumPy .npy files (format 1.0/2.0/3.0, little-endian, C order) to and from Tensors.
// bf16 has no NumPy dtype: it is written as '<u2' raw bits only when asked; f16 is '<f2'.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <string>

namespace gpuopt {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(const void* data, size_t size, const std::string& what = "buffer");
Status write_npy(const std::string& path, const Tensor& t);
std::string serialize_npy(const Tensor& t);

}  // namespace gpuopt
