// Small host -> device copies that need neither a staging buffer nor a host wait: the bytes
// travel as kernel parameters (32 KiB per launch). The copy is ordered on the stream, can be
// recorded in a CUDA graph (the bytes live in the graph), and the host buffer may be freed as
// soon as the call returns. Used for shape-derived values and per-call parameters.
//
//   GPUOPT_RETURN_IF_ERROR(upload_inline(host.raw(), dev.raw(), host.nbytes(), stream));
#pragma once

#include "core/status.h"

#include <cstddef>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// Above this, a staging buffer and cudaMemcpyAsync are cheaper than one launch per 32 KiB.
constexpr size_t kInlineUploadMax = size_t{64} << 10;

Status upload_inline(const void* host, void* dev, size_t bytes, cudaStream_t stream);

}  // namespace gpuopt::cuda
