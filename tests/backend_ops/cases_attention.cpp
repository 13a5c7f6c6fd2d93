// Attention (ONNX opset 23, 4-D) on the CUDA kernel against the CPU reference: sequence lengths
// 1, 7, 129 and 1024 (on both sides of the kernel's 16-query and 64-key tiles), head sizes 16 to
// 128 (v_head != head too), batch 1 and odd, grouped KV heads, no mask, an additive BERT-style
// [B,1,1,S] mask, a [Sq,Skv] mask, a bool mask, is_causal, an explicit scale; and BERT-base sizes
// and GPT-2 sizes as perf cases. The qkv_packed form (merge_qkv: Q, K and V read in place from one [B, S, 3*H*D]
// tensor) at sequence lengths 1, 7 and 129, head sizes 64, 80 and 128, batch 1 and odd, with no
// mask, a padding mask, is_causal, an additive [B,1,S,S] mask and all keys masked (nan_to_zero).
// Swin's window attention (shifted and not) at windows of 7 and 12.
#include "cases.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <tuple>

namespace gpuopt::backend_ops {
namespace {

// Attention's qkv_packed form: input 0 is [B, S, 3*H*D] (Q's heads, K's, V's), K and V absent.
void add_packed_attention_cases(std::vector<Case>& cases) {
  const InputSpec none{DType::Undefined, {}, false, {}, 0, 0};
  const double inf = std::numeric_limits<double>::infinity();
  struct Dims {
    int64_t b, s, h, d;
  };
  const std::vector<Dims> dims = {{1, 1, 2, 64}, {3, 7, 4, 80}, {1, 129, 2, 128}, {3, 129, 12, 64}, {1, 7, 2, 128}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Dims& x : dims) {
      const Shape qkv{x.b, x.s, 3 * x.h * x.d};
      auto add = [&](const std::string& what, std::vector<InputSpec> extra, AttributeMap attrs) {
        std::vector<InputSpec> in{data(dt, qkv, -1, 1), none, none};
        in.insert(in.end(), extra.begin(), extra.end());
        attrs["q_num_heads"] = attr_i(x.h);
        attrs["kv_num_heads"] = attr_i(x.h);
        attrs["qkv_packed"] = attr_i(1);
        Case c{"Attention", label(dt, qkv, fmt::format("qkv_packed {} heads {}", x.h, what)), std::move(in),
               std::move(attrs)};
        c.opset = 23;
        cases.push_back(std::move(c));
      };
      // Padding: batch i masks its last i keys (never all of them).
      std::vector<double> pad(static_cast<size_t>(x.b * x.s), 0.0);
      for (int64_t b = 0; b < x.b; ++b)
        for (int64_t j = std::max<int64_t>(1, x.s - b); j < x.s; ++j) pad[static_cast<size_t>(b * x.s + j)] = -inf;
      add("no mask", {}, {});
      add("padding mask", {const_tensor(dt, {x.b, 1, 1, x.s}, pad)}, {});
      add("causal", {}, {{"is_causal", attr_i(1)}});
      add("additive [B,1,S,S] scale", {data(dt, {x.b, 1, x.s, x.s}, -4, 4)}, {{"scale", attr_f(0.2f)}});
      // Batch 0: every key masked; with nan_to_zero its rows are 0.
      std::vector<double> all = pad;
      for (int64_t j = 0; j < x.s; ++j) all[static_cast<size_t>(j)] = -inf;
      add("all keys masked in batch 0, nan_to_zero", {const_tensor(dt, {x.b, 1, 1, x.s}, all)}, {{"nan_to_zero", attr_i(1)}});
    }
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t b : {1, 32}) {
      Case c{"Attention", label(dt, {b, 128, 3 * 768}, fmt::format("perf BERT-base b{} qkv_packed", b)),
             {data(dt, {b, 128, 3 * 768}, -1, 1), none, none, data(dt, {b, 1, 1, 128}, -8, 0)},
             {{"q_num_heads", attr_i(12)}, {"kv_num_heads", attr_i(12)}, {"qkv_packed", attr_i(1)}}};
      c.opset = 23;
      cases.push_back(std::move(c));
    }
  // BERT's mask as the model hands it over: expanded over the query rows once by the
  // attention_mask pass ([B, 1, S, S]), so the flash kernel loads a mask tile per query row.
  {
    Case c{"Attention", label(DType::F16, {32, 128, 3 * 768}, "perf BERT-base b32 qkv_packed mask [B,1,S,S]"),
           {data(DType::F16, {32, 128, 3 * 768}, -1, 1), none, none, data(DType::F16, {32, 1, 128, 128}, -8, 0)},
           {{"q_num_heads", attr_i(12)}, {"kv_num_heads", attr_i(12)}, {"qkv_packed", attr_i(1)}}};
    c.opset = 23;
    cases.push_back(std::move(c));
  }
  // GPT-2's form (causal, no mask) and ViT-B/16's (197 tokens, no mask).
  for (const auto& [s, causal, what] : {std::tuple<int64_t, int64_t, const char*>{128, 1, "perf GPT-2 b32 qkv_packed causal"},
                                        {197, 0, "perf ViT-B/16 b32 qkv_packed"}}) {
    Case c{"Attention", label(DType::F16, {32, s, 3 * 768}, what),
           {data(DType::F16, {32, s, 3 * 768}, -1, 1), none, none},
           {{"q_num_heads", attr_i(12)}, {"kv_num_heads", attr_i(12)}, {"qkv_packed", attr_i(1)}, {"is_causal", attr_i(causal)}}};
    c.opset = 23;
    cases.push_back(std::move(c));
  }
}

// Swin's window attention as fuse_attention writes it (window_attention.cpp): the shifted
// blocks with the windows among the heads, q [B, nW*H, N, 32] and one constant [1, nW*H, N, N]
// holding the relative-position bias plus the shift mask (-100 between tokens from different
// sides of the shift), windows of 7x7 and 12x12 tokens; the unshifted blocks [B*nW, H, N, 32]
// with the bias [1, H, N, N]; and swin_t's stage 1 at batch 32 in both forms as perf cases.
void add_window_attention_cases(std::vector<Case>& cases) {
  auto window_bias = [](int64_t windows, int64_t heads, int64_t n, bool shifted) {
    std::vector<double> v;
    const int64_t side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n))));
    for (int64_t w = 0; w < windows; ++w)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double b = 0.25 * static_cast<double>((i * 7 + j * 3 + h * 5) % 17) - 2.0;
            // Odd windows straddle the shift: rows and columns cut at side/2.
            if (shifted && (w % 2 == 1) && ((i % side) < side / 2) != ((j % side) < side / 2)) b += -100.0;
            v.push_back(b);
          }
    return v;
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t win : {7, 12}) {
      const int64_t b = 2, nw = 4, h = 3, n = win * win, d = 32;
      const Shape q{b, nw * h, n, d};
      Case c{"Attention", label(dt, q, fmt::format("Swin window {} shifted: bias + mask [1,nW*H,N,N]", win)),
             {data(dt, q, -1, 1), data(dt, q, -1, 1), data(dt, q), const_tensor(dt, {1, nw * h, n, n}, window_bias(nw, h, n, true))},
             {{"scale", attr_f(0.1767767f)}}};
      c.opset = 23;
      cases.push_back(std::move(c));
      const Shape qw{b * nw, h, n, d};
      Case u{"Attention", label(dt, qw, fmt::format("Swin window {}: bias [1,H,N,N]", win)),
             {data(dt, qw, -1, 1), data(dt, qw, -1, 1), data(dt, qw), const_tensor(dt, {1, h, n, n}, window_bias(1, h, n, false))},
             {{"scale", attr_f(0.1767767f)}}};
      u.opset = 23;
      cases.push_back(std::move(u));
    }
  for (bool shifted : {true, false}) {
    const Shape q = shifted ? Shape{32, 64 * 3, 49, 32} : Shape{32 * 64, 3, 49, 32};
    const int64_t bh = shifted ? 64 * 3 : 3;
    Case c{"Attention", label(DType::F16, q, shifted ? "perf swin_t b32 stage 1 shifted" : "perf swin_t b32 stage 1"),
           {data(DType::F16, q, -1, 1), data(DType::F16, q, -1, 1), data(DType::F16, q),
            const_tensor(DType::F16, {1, bh, 49, 49}, window_bias(shifted ? 64 : 1, 3, 49, shifted))},
           {{"scale", attr_f(0.1767767f)}}};
    c.opset = 23;
    cases.push_back(std::move(c));
  }
}

}  // namespace

void add_attention_cases(std::vector<Case>& cases) {
  struct Dims {
    int64_t b, hq, hkv, sq, skv, d, dv;
  };
  const std::vector<Dims> dims = {{1, 2, 2, 1, 7, 64, 64},     {3, 2, 2, 7, 7, 80, 80},   {2, 4, 4, 129, 129, 64, 64},
                                  {1, 2, 2, 33, 1024, 128, 128}, {2, 3, 3, 16, 48, 32, 16}, {2, 4, 2, 17, 17, 64, 64},
                                  {1, 2, 2, 130, 130, 128, 128}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Dims& x : dims) {
      const Shape q{x.b, x.hq, x.sq, x.d}, k{x.b, x.hkv, x.skv, x.d}, v{x.b, x.hkv, x.skv, x.dv};
      auto add = [&](const std::string& what, std::vector<InputSpec> extra, AttributeMap attrs) {
        std::vector<InputSpec> in{data(dt, q, -1, 1), data(dt, k, -1, 1), data(dt, v)};
        in.insert(in.end(), extra.begin(), extra.end());
        Case c{"Attention", label(dt, q, fmt::format("kv {} {}", x.skv, what)), std::move(in), std::move(attrs)};
        c.opset = 23;
        cases.push_back(std::move(c));
      };
      add("no mask", {}, {});
      add("mask [B,1,1,S]", {data(dt, {x.b, 1, 1, x.skv}, -8, 0)}, {});
      add("mask [Sq,Skv] scale", {data(dt, {x.sq, x.skv}, -4, 4)}, {{"scale", attr_f(0.3f)}});
      InputSpec keep = data(DType::Bool, {x.b, 1, x.sq, x.skv});
      add("bool mask", {keep}, {});
      if (x.sq == x.skv) add("causal", {}, {{"is_causal", attr_i(1)}});
    }
  // The 3-D form [B, S, H*D] (q_num_heads / kv_num_heads), read and written in place: what the
  // attention fusion writes for head splits.
  struct Dims3 {
    int64_t b, sq, skv, hq, hkv, d;
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Dims3& x : std::vector<Dims3>{{2, 7, 7, 4, 4, 16}, {3, 129, 129, 12, 12, 64}, {2, 17, 33, 8, 2, 32}}) {
      Case c{"Attention", label(dt, {x.b, x.sq, x.hq * x.d}, fmt::format("3-D heads {}/{} mask", x.hq, x.hkv)),
             {data(dt, {x.b, x.sq, x.hq * x.d}, -1, 1), data(dt, {x.b, x.skv, x.hkv * x.d}, -1, 1),
              data(dt, {x.b, x.skv, x.hkv * x.d}), data(dt, {x.b, 1, 1, x.skv}, -8, 0)},
             {{"q_num_heads", attr_i(x.hq)}, {"kv_num_heads", attr_i(x.hkv)}}};
      c.opset = 23;
      cases.push_back(std::move(c));
    }
  // gpuopt's nan_to_zero (fuse_attention's form of the exporters' NaN guard): batch 0's keys are
  // all masked (-inf), so its rows are 0 instead of NaN; batch 1 keeps one key masked. The f16
  // case takes cuDNN's SDPA (then the in-place pass), f32 the scalar kernel, 4-D and 3-D.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const std::vector<double> mask{-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,
                                   0,    0,    -inf, 0,    0,    0,    0,    0};
    Case c4{"Attention", label(dt, {2, 2, 8, 64}, "all keys masked in batch 0, nan_to_zero"),
            {data(dt, {2, 2, 8, 64}, -1, 1), data(dt, {2, 2, 8, 64}, -1, 1), data(dt, {2, 2, 8, 64}),
             const_tensor(dt, {2, 1, 1, 8}, mask)},
            {{"nan_to_zero", attr_i(1)}}};
    c4.opset = 23;
    cases.push_back(std::move(c4));
    Case c3{"Attention", label(dt, {2, 8, 128}, "3-D, all keys masked in batch 0, nan_to_zero"),
            {data(dt, {2, 8, 128}, -1, 1), data(dt, {2, 8, 128}, -1, 1), data(dt, {2, 8, 128}),
             const_tensor(dt, {2, 1, 1, 8}, mask)},
            {{"q_num_heads", attr_i(2)}, {"kv_num_heads", attr_i(2)}, {"nan_to_zero", attr_i(1)}}};
    c3.opset = 23;
    cases.push_back(std::move(c3));
  }
  add_packed_attention_cases(cases);
  add_window_attention_cases(cases);
  for (DType dt : {DType::F16, DType::BF16}) {
    Case c{"Attention", label(dt, {32, 12, 128, 64}, "perf BERT-base b32"),
           {data(dt, {32, 12, 128, 64}, -1, 1), data(dt, {32, 12, 128, 64}, -1, 1), data(dt, {32, 12, 128, 64}),
            data(dt, {32, 1, 1, 128}, -8, 0)},
           {}};
    c.opset = 23;
    cases.push_back(std::move(c));
  }
}

}  // namespace gpuopt::backend_ops
