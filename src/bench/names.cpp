// Names and sizes of the GPU test kinds (needed by the CPU-only build too, for tables and flags).
#include "bench/gpu.h"

namespace gpuopt::bench {

const char* mem_test_name(MemTest t) {
  switch (t) {
    case MemTest::MemcpyD2D:
      return "d2d_memcpy";
    case MemTest::CopyKernel:
      return "d2d_copy_kernel";
    case MemTest::CopyKernelStreaming:
      return "d2d_copy_kernel_cs";
    case MemTest::ReadKernel:
      return "read_kernel";
    case MemTest::WriteKernel:
      return "write_kernel";
    case MemTest::H2DPinned:
      return "h2d_pinned";
    case MemTest::D2HPinned:
      return "d2h_pinned";
    case MemTest::H2DPageable:
      return "h2d_pageable";
    case MemTest::D2HPageable:
      return "d2h_pageable";
    case MemTest::P2P:
      return "p2p_memcpy";
  }
  return "?";
}

bool mem_test_is_transfer(MemTest t) {
  return t == MemTest::H2DPinned || t == MemTest::D2HPinned || t == MemTest::H2DPageable || t == MemTest::D2HPageable ||
         t == MemTest::P2P;
}

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::F32:
      return "f32";
    case GemmType::TF32:
      return "tf32";
    case GemmType::F16:
      return "f16";
    case GemmType::BF16:
      return "bf16";
    case GemmType::FP8:
      return "fp8";
    case GemmType::INT8:
      return "int8";
  }
  return "?";
}

bool parse_gemm_type(const std::string& s, GemmType* t) {
  for (GemmType g : {GemmType::F32, GemmType::TF32, GemmType::F16, GemmType::BF16, GemmType::FP8, GemmType::INT8}) {
    if (s == gemm_type_name(g)) {
      *t = g;
      return true;
    }
  }
  if (s == "fp16") return *t = GemmType::F16, true;
  if (s == "fp32") return *t = GemmType::F32, true;
  if (s == "fp8_e4m3" || s == "e4m3") return *t = GemmType::FP8, true;
  return false;
}

int gemm_in_bytes(GemmType t) {
  switch (t) {
    case GemmType::F32:
    case GemmType::TF32:
      return 4;
    case GemmType::F16:
    case GemmType::BF16:
      return 2;
    case GemmType::FP8:
    case GemmType::INT8:
      return 1;
  }
  return 0;
}

int gemm_out_bytes(GemmType t) {
  switch (t) {
    case GemmType::F32:
    case GemmType::TF32:
    case GemmType::INT8:
      return 4;  // int8 accumulates and stores int32
    case GemmType::F16:
    case GemmType::BF16:
    case GemmType::FP8:
      return 2;  // fp8 inputs, bf16 output
  }
  return 0;
}

}  // namespace gpuopt::bench
