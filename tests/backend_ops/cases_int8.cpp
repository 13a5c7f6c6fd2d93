// Int8Gemm (ai.gpuopt, written by fold_qdq): int8 x int8 -> int32 on cuBLASLt's tensor cores (K
// and N multiples of 4) or the simple kernel (other shapes), then the dequantize / bias / Relu
// epilogue. The integer products are exact on both sides; the epilogue's float rounding is what
// the tolerance covers.
#include "cases.h"

namespace gpuopt::backend_ops {

void add_int8_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  struct Sz {
    int64_t m, k, n;
    const char* what;
  };
  const Sz sizes[] = {{64, 256, 128, "tensor cores"}, {5, 19, 7, "odd: simple kernel"}, {1, 768, 768, "m=1"},
                      {300, 64, 36, "tensor cores, m not /4"}};
  for (DType dt : {DType::F32, DType::F16}) {
    for (const Sz& s : sizes) {
      auto a = data(DType::I8, {s.m, s.k}, -127, 128);
      auto b = data(DType::I8, {s.n, s.k}, -127, 128);
      const double sa = 0.02;
      cases.push_back({"Int8Gemm", label(dt, {s.m, s.k, s.n}, std::string(s.what) + " per-channel bias relu"),
                       {a, b, scalar(dt, sa), data(dt, {s.n}, 1e-4, 1e-3), data(dt, {s.n})},
                       {{"activation", attr_s("Relu")}}});
      cases.push_back({"Int8Gemm", label(dt, {s.m, s.k, s.n}, std::string(s.what) + " per-tensor"),
                       {a, b, scalar(dt, sa), scalar(dt, 5e-4), none},
                       {}});
    }
    // A of rank 3: the leading dims flatten into M.
    cases.push_back({"Int8Gemm", label(dt, {2, 9, 64}, "rank-3 A"),
                     {data(DType::I8, {2, 9, 64}, -127, 128), data(DType::I8, {32, 64}, -127, 128), scalar(dt, 0.01),
                      data(dt, {32}, 1e-4, 1e-3), data(dt, {32})},
                     {}});
  }
}

}  // namespace gpuopt::backend_ops
