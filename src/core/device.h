// Parsing a device id from user text (--device, a model config's instance group), once, at the
// edge:
//
//   GPUOPT_ASSIGN_OR_RETURN(Device d, parse_device("cuda:1"));   // {kCuda, 1}
//   parse_device("cuda")  -> cuda:0      parse_device("cpu") -> cpu (the fast CPU backend)
//   parse_device("cpu-ref") -> kCpuReference (the CPU reference kernels, the tests' oracle)
//   parse_device("tpu")   -> InvalidArgument("unknown device 'tpu': expected cpu, cpu-ref, cuda or cuda:N")
//
// The Device type itself lives in core/tensor.h (tensors carry it).
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <string_view>

namespace gpuopt {

Result<Device> parse_device(std::string_view text);

// The CPU reference backend as a device: the CPU (tensors live in host memory as for "cpu"),
// index 1 picking the reference kernels instead of the fast ones. to_string() gives "cpu-ref".
inline constexpr Device kCpuReference{DeviceKind::kCpu, 1};

// "this host has 1 CUDA device" / "this host has no CUDA device": the tail of a refusal that
// names a device that does not exist.
std::string cuda_device_count_phrase(int count);

}  // namespace gpuopt
