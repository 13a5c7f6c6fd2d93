// Parsing a device id from user text (--device, a model config's instance group), once, at the
// edge:
//
//   GPUOPT_ASSIGN_OR_RETURN(Device d, parse_device("cuda:1"));   // {kCuda, 1}
//   parse_device("cuda")  -> cuda:0      parse_device("cpu") -> cpu
//   parse_device("tpu")   -> InvalidArgument("unknown device 'tpu': expected cpu, cuda or cuda:N")
//
// The Device type itself lives in core/tensor.h (tensors carry it).
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <string_view>

namespace gpuopt {

Result<Device> parse_device(std::string_view text);

// "this host has 1 CUDA device" / "this host has no CUDA device": the tail of a refusal that
// names a device that does not exist.
std::string cuda_device_count_phrase(int count);

}  // namespace gpuopt
