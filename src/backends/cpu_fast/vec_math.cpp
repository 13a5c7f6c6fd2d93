#include "backends/cpu_fast/vec_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

// Each array function twice: AVX2+FMA (x86-64-v3) and the baseline, chosen once at load (ifunc).
// Not under the sanitizers: an ifunc resolver runs during relocation, before their runtimes are
// up, and an instrumented one crashes the program at load (TSan: every test binary segfaulted).
// (CMake defines GPUOPT_SANITIZED there; the TSan build also undefines __SANITIZE_THREAD__.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__) && !defined(GPUOPT_SANITIZED)
#define GPUOPT_VEC_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define GPUOPT_VEC_CLONES
#endif

namespace gpuopt::cpu_fast::vec {
namespace {

// Cephes' expf: e^x = 2^n e^r, r = x - n ln2 in [-ln2/2, ln2/2], e^r by a degree-6 polynomial.
// Below -87.3 the result is 0 (the reference's exp underflows there too, up to denormals).
inline float exp1(float x) {
  const float hi = 88.3762626647949f, lo = -87.3365447504f;
  const float xc = std::min(std::max(x, lo), hi);  // min/max, not branches: the loops vectorise
  const float fx = xc * 1.44269504088896341f + 0.5f;
  const float tf = static_cast<float>(static_cast<int>(fx));
  const float n = tf - (tf > fx ? 1.0f : 0.0f);  // floor(fx)
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float e = p * scale;  // NaN in, NaN out (through r)
  return x < lo ? 0.0f : e;
}

// Eigen's rational tanh (generic_fast_tanh_float): |error| < 2 ulp, exact sign, saturates at +-1.
inline float tanh1(float x) {
  const float c = 7.90531110763549805f;
  const float xc = std::min(std::max(x, -c), c);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float t = p / q;
  return std::fabs(x) < 0.0004f ? x : t;
}

// Eigen's rational erf (generic_fast_erf_float), clamped to [-4, 4] where erf is +-1 in float.
inline float erf1(float x) {
  const float a = std::min(std::max(x, -4.0f), 4.0f);
  const float x2 = a * a;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * a;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

// Reductions in 16 lanes (float addition is not associative, so the compiler would not split a
// single accumulator into vector lanes itself).
constexpr int kLanes = 16;
template <class Op>
inline float reduce(const float* x, int64_t n, float init, Op op) {
  float acc[kLanes];
  for (float& a : acc) a = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = op(acc[j], x[i + j]);
  for (; i < n; ++i) acc[0] = op(acc[0], x[i]);
  float r = init;
  for (float a : acc) r = op(r, a);
  return r;
}

}  // namespace

GPUOPT_VEC_CLONES void exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp1(x[i]);
}

GPUOPT_VEC_CLONES void tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh1(x[i]);
}

GPUOPT_VEC_CLONES void erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf1(x[i]);
}

GPUOPT_VEC_CLONES void sigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + exp1(-x[i]));
}

GPUOPT_VEC_CLONES void swish(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + exp1(-x[i]));
}

GPUOPT_VEC_CLONES void gelu_erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + erf1(x[i] * 0.70710678118654752f));
}

GPUOPT_VEC_CLONES void gelu_tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh1(0.79788456080286535f * (v + 0.044715f * v * v * v)));
  }
}

GPUOPT_VEC_CLONES void softmax_row(float* x, int64_t n) {
  const float mx = reduce(x, n, -std::numeric_limits<float>::infinity(), [](float a, float b) { return b > a ? b : a; });
  if (mx == -std::numeric_limits<float>::infinity()) {  // every value masked: 0/0, as the reference
    for (int64_t i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = exp1(x[i] - mx);
  const float sum = reduce(x, n, 0.0f, [](float a, float b) { return a + b; });
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

GPUOPT_VEC_CLONES void moments(const float* x, int64_t n, float* mean, float* var) {
  const float s = reduce(x, n, 0.0f, [](float a, float b) { return a + b; });
  const float m = n ? s / static_cast<float>(n) : 0.0f;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += (x[i + j] - m) * (x[i + j] - m);
  for (; i < n; ++i) acc[0] += (x[i] - m) * (x[i] - m);
  float v = 0.0f;
  for (float a : acc) v += a;
  *mean = m;
  *var = n ? v / static_cast<float>(n) : 0.0f;
}

}  // namespace gpuopt::cpu_fast::vec
