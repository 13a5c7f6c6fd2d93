// conv_gemm.h: channels-last 1x1 convolutions as one cuBLASLt GEMM with bias, z and Relu fused.
#include "ops/conv/cuda/conv_gemm.h"

#include "backends/cuda/plan_store.h"
#include "gpuopt/kernel_settings.h"
#include "ops/matmul/cuda/matmul_lt.h"

#include <map>
#include <mutex>

namespace gpuopt::cuda {
namespace {

std::mutex g_mu;
std::map<std::string, ConvRoute> g_routes;

}  // namespace

bool conv_gemm_applies(const ConvKey& k, ConvAct act, bool has_bias) {
  if (!k.nhwc || (k.dt != DType::F16 && k.dt != DType::BF16)) return false;
  if (k.kh != 1 || k.kw != 1 || k.sh != 1 || k.sw != 1 || k.ph != 0 || k.pw != 0 || k.dh != 1 || k.dw != 1) return false;
  if (k.group != 1 || k.oh != k.h || k.ow != k.w || k.c % 8 != 0 || k.m % 8 != 0) return false;
  return act == ConvAct::kNone || (act == ConvAct::kRelu && has_bias);
}

Status run_conv_gemm(CudaKernelContext& k, const ConvKey& key, ConvAct act, const void* x, const void* w,
                     const void* b, const void* z, void* y) {
  MatmulShape s;
  s.m = key.n * key.h * key.w;  // every pixel a row
  s.n = key.m;
  s.k = key.c;
  s.trans_b = true;  // w is stored [M, 1, 1, C] = [n, k]
  const Epilogue epi = !b ? Epilogue::kNone : act == ConvAct::kRelu ? Epilogue::kBiasRelu : Epilogue::kBias;
  return matmul(k.ctx, s, key.dt, x, w, y, 1.f, z ? 1.f : 0.f, b, epi, z);
}

std::string conv_gemm_entry(const ConvKey& key, ConvAct act, bool has_bias, bool has_z) {
  return fmt::format("convgemm act={} bias={} z={} {}", conv_act_name(act), has_bias ? 1 : 0, has_z ? 1 : 0,
                     conv_key_text(key));
}

ConvRoute conv_route(const std::string& entry) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto it = g_routes.find(entry); it != g_routes.end()) return it->second;
  }
  const auto cached = PlanStore::current().find(entry);
  if (!cached || (*cached != "gemm" && *cached != "cudnn")) return ConvRoute::kUndecided;
  const ConvRoute r = *cached == "gemm" ? ConvRoute::kGemm : ConvRoute::kCudnn;
  std::lock_guard<std::mutex> lock(g_mu);
  g_routes[entry] = r;
  return r;
}

void set_conv_route(const std::string& entry, ConvRoute route) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_routes[entry] = route;
  }
  PlanStore::current().put(entry, route == ConvRoute::kGemm ? "gemm" : "cudnn");
}

}  // namespace gpuopt::cuda
