#include "bench/cpu_gemm.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#ifdef GPUOPT_HAVE_BLAS
#include <cblas.h>
#endif

namespace gpuopt::bench {

#ifdef GPUOPT_HAVE_BLAS
namespace {
std::vector<float> random_matrix(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(n) * n);
  for (auto& v : m) v = u(rng);
  return m;
}
void sgemm(int n, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}
}  // namespace

Result<std::string> cpu_blas_description() {
  std::string cfg = openblas_get_config();
  while (!cfg.empty() && cfg.back() == ' ') cfg.pop_back();
  return fmt::format("{} ({} threads)", cfg, openblas_get_num_threads());
}

Result<TimingStats> time_cpu_sgemm(int n, int repeat) {
  if (n <= 0) return Status::InvalidArgument("matrix size {} must be positive", n);
  const auto a = random_matrix(n, 1), b = random_matrix(n, 2);
  std::vector<float> c(static_cast<size_t>(n) * n);
  sgemm(n, a.data(), b.data(), c.data());  // warm-up: thread pool start, page faults
  std::vector<double> s;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sgemm(n, a.data(), b.data(), c.data());
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize(s);
}

Status check_cpu_sgemm(int n) {
  const auto a = random_matrix(n, 3), b = random_matrix(n, 4);
  std::vector<float> c(static_cast<size_t>(n) * n, NAN);
  sgemm(n, a.data(), b.data(), c.data());
  std::mt19937 rng(5);
  for (int s = 0; s < 64; ++s) {
    const int i = rng() % n, j = rng() % n;
    double ref = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      ref += static_cast<double>(a[i * n + k]) * b[k * n + j];
      mag += std::fabs(static_cast<double>(a[i * n + k]) * b[k * n + j]);
    }
    const double got = c[static_cast<size_t>(i) * n + j];
    if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-6))
      return Status::Internal("OpenBLAS sgemm n={}: C[{},{}] = {}, expected {}", n, i, j, got, ref);
  }
  return Status::Ok();
}
#else
Result<std::string> cpu_blas_description() {
  return Status::Unavailable("built without BLAS");
}
Result<TimingStats> time_cpu_sgemm(int, int) {
  return Status::Unavailable("built without BLAS");
}
Status check_cpu_sgemm(int) {
  return Status::Unavailable("built without BLAS");
}
#endif

}  // namespace gpuopt::bench
