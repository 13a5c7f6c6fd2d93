// gpuopt public C++ API: everything a program needs to load and run a model.
//
//   #include "gpuopt/gpuopt.h"
//   auto s = gpuopt::Session::load("model.onnx");           // Result<std::unique_ptr<Session>>
//   auto out = (*s)->run({{"x", gpuopt::Tensor::zeros(gpuopt::DType::F32, {1, 4})}});
//
// See gpuopt/session.h for the full example and docs/api.md for the guide; link gpuopt_engine.
#pragma once

#include "core/dtype.h"
#include "core/npy.h"
#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/session.h"
