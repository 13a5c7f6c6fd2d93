// A paged-attention batch built on the host (scattered block tables, random K/V/Q rounded to the
// dtype, or K/V as e4m3 codes with per-layer scales for an FP8 cache) and the plain
// double-precision reference the kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>

#include "llm/kernels/llm_kernels.h"
#include "llm/quantized.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {

struct SeqSpec {
  int q_len, ctx;
};

struct AttnBatch {
  int H, KV, D, bs, window = 0;
  DType dt;
  std::vector<SeqSpec> seqs;
  int padded_seqs = 0;  // extra sequences with no queries (a captured graph's padding)
  bool fp8 = false;     // the cache holds e4m3(K / k_scale), e4m3(V / v_scale)
  float k_scale = 1.0f, v_scale = 1.0f;
  // host
  int num_blocks = 0, max_blocks = 0, T = 0, max_q = 0;
  int64_t max_ctx = 0;
  std::vector<int32_t> qs, ctx, tables;
  std::vector<float> q, kc, vc;  // rounded to dt
  // device
  DevBuf dq, dk, dv, dout, dqs, dctx, dtab, dws;

  void build(std::mt19937& rng) {
    const int n = static_cast<int>(seqs.size()) + padded_seqs;
    for (auto& s : seqs) {
      max_blocks = std::max(max_blocks, (s.ctx + bs - 1) / bs);
      max_q = std::max(max_q, s.q_len);
      max_ctx = std::max<int64_t>(max_ctx, s.ctx);
      num_blocks += (s.ctx + bs - 1) / bs;
    }
    num_blocks += 3;  // blocks nobody owns
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // each sequence's blocks scattered
    tables.assign(static_cast<size_t>(n) * max_blocks, 0);
    qs.assign(n + 1, 0);
    ctx.assign(n, 0);
    int next = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      qs[s + 1] = qs[s] + seqs[s].q_len;
      ctx[s] = seqs[s].ctx;
      for (int b = 0; b < (seqs[s].ctx + bs - 1) / bs; ++b) tables[s * max_blocks + b] = perm[next++];
    }
    for (int s = static_cast<int>(seqs.size()); s < n; ++s) qs[s + 1] = qs[s];
    T = qs[seqs.size()];
    const size_t es = dtype_size(dt);
    q = round_to(random_vec(static_cast<size_t>(T) * qstride(), rng), dt);
    const size_t cn = static_cast<size_t>(num_blocks) * bs * KV * D;
    kc = round_to(random_vec(cn, rng), dt);
    vc = round_to(random_vec(cn, rng), dt);
    dq.alloc(q.size() * es);
    dq.upload(encode(q, dt));
    if (fp8) {
      // The codes of x / scale (quantized.h's e4m3, written from the format); the reference reads
      // them back times the scale, as the kernel must.
      auto codes = [](std::vector<float>& x, float scale) {
        std::vector<uint8_t> c(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          c[i] = float_to_fp8_e4m3(x[i] / scale);
          x[i] = fp8_e4m3_to_float(c[i]) * scale;
        }
        return c;
      };
      dk.alloc(cn);
      dk.upload(codes(kc, k_scale));
      dv.alloc(cn);
      dv.upload(codes(vc, v_scale));
    } else {
      dk.alloc(cn * es);
      dk.upload(encode(kc, dt));
      dv.alloc(cn * es);
      dv.upload(encode(vc, dt));
    }
    dout.alloc(static_cast<size_t>(std::max(T, 1)) * H * D * es);
    dqs.alloc(qs.size() * 4);
    dqs.upload(qs);
    dctx.alloc(ctx.size() * 4);
    dctx.upload(ctx);
    dtab.alloc(std::max<size_t>(tables.size(), 1) * 4);
    dtab.upload(tables);
    const size_t ws = cuda::paged_attention_workspace_bytes(n * max_q, H, D, max_ctx);
    dws.alloc(std::max<size_t>(ws, 16));
  }
  // q rows as a fused qkv projection would lay them out (q | k | v), to exercise q_stride.
  int qstride() const { return (H + 2 * KV) * D; }

  cuda::PagedAttentionArgs args(bool split) const {
    cuda::PagedAttentionArgs a;
    a.q = dq.get();
    a.q_stride = qstride();
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.out = dout.get();
    a.query_start = dqs.as<int32_t>();
    a.context_lens = dctx.as<int32_t>();
    a.block_tables = dtab.as<int32_t>();
    a.num_seqs = static_cast<int>(seqs.size()) + padded_seqs;
    a.max_blocks_per_seq = max_blocks;
    a.max_query_len = max_q;
    a.max_context = max_ctx;
    a.num_heads = H;
    a.num_kv_heads = KV;
    a.head_dim = D;
    a.block_size = bs;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    a.sliding_window = window;
    a.dt = dt;
    a.kv_dt = fp8 ? cuda::kKvFp8 : dt;
    a.k_scale = k_scale;
    a.v_scale = v_scale;
    a.workspace = split ? dws.get() : nullptr;
    return a;
  }

  // out[t, h, :] in double.
  std::vector<double> reference() const {
    std::vector<double> out(static_cast<size_t>(T) * H * D, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const int G = H / KV;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int ql = seqs[s].q_len, c = seqs[s].ctx;
      for (int i = 0; i < ql; ++i) {
        const int pos = c - ql + i, t = qs[s] + i;
        const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
        for (int h = 0; h < H; ++h) {
          const int kvh = h / G;
          std::vector<double> sc(pos + 1 - lo);
          double mx = -1e300;
          for (int kp = lo; kp <= pos; ++kp) {
            const size_t slot = static_cast<size_t>(tables[s * max_blocks + kp / bs]) * bs + kp % bs;
            const float* kr = &kc[(slot * KV + kvh) * D];
            const float* qr = &q[static_cast<size_t>(t) * qstride() + h * D];
            double d = 0;
            for (int e = 0; e < D; ++e) d += static_cast<double>(qr[e]) * kr[e];
            sc[kp - lo] = d * scale;
            mx = std::max(mx, sc[kp - lo]);
          }
          double sum = 0;
          for (auto& v : sc) sum += (v = std::exp(v - mx));
          double* o = &out[(static_cast<size_t>(t) * H + h) * D];
          for (int kp = lo; kp <= pos; ++kp) {
            const size_t slot = static_cast<size_t>(tables[s * max_blocks + kp / bs]) * bs + kp % bs;
            const float* vr = &vc[(slot * KV + kvh) * D];
            const double p = sc[kp - lo] / sum;
            for (int e = 0; e < D; ++e) o[e] += p * vr[e];
          }
        }
      }
    }
    return out;
  }
};

// Outputs are convex combinations of V values in [-1, 1] accumulated in f32. f32: summing up to
// 8192 weighted terms with online rescaling drifts a few ulp of the partial sums (abs 2e-5, twice
// CONVENTIONS.md's). f16/bf16: the softmax weights enter the tensor-core P.V rounded to the dtype
// (relative 2^-11 / 2^-8 each, at most that times max|v| on the output) plus the output's own
// rounding: within the dtype's usual abs 2.5e-3 / 2e-2.
inline Tol attention_tol(DType dt) {
  switch (dt) {
    case DType::F32:
      return {2e-5, 1e-4};
    case DType::F16:
      return {2.5e-3, 1e-3};
    default:
      return {2e-2, 1e-2};
  }
}

}  // namespace gpuopt::llm::test
