// RotaryEmbedding (ONNX opset 23) on the CUDA kernel against the CPU reference: 3-D [B, S, H*D]
// (num_heads) and 4-D [B, H, S, D] inputs, sequence lengths 1, 7 and 129, head sizes 64, 80 and
// 128, batch 1 and odd, halves and interleaved pairs, a partial rotary_embedding_dim, the caches
// indexed by position_ids or given per token ([B, S, rot/2], no position_ids).
#include "cases.h"

#include <fmt/format.h>

namespace gpuopt::backend_ops {

void add_rotary_cases(std::vector<Case>& cases) {
  struct Dims {
    int64_t b, heads, seq, head, rot;
  };
  const std::vector<Dims> dims = {{1, 2, 1, 64, 0}, {3, 2, 7, 80, 0}, {2, 4, 129, 128, 0}, {3, 3, 7, 80, 32},
                                  {1, 2, 129, 64, 16}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Dims& d : dims)
      for (int interleaved : {0, 1})
        for (bool four_d : {false, true})
          for (bool with_pos : {true, false}) {
            const int64_t rot = d.rot ? d.rot : d.head, max_pos = d.seq + 9;
            const Shape x = four_d ? Shape{d.b, d.heads, d.seq, d.head} : Shape{d.b, d.seq, d.heads * d.head};
            const Shape cache = with_pos ? Shape{max_pos, rot / 2} : Shape{d.b, d.seq, rot / 2};
            std::vector<InputSpec> in{data(dt, x), data(dt, cache, -1, 1), data(dt, cache, -1, 1)};
            if (with_pos) {
              std::vector<double> pos;
              for (int64_t b = 0; b < d.b; ++b)
                for (int64_t s = 0; s < d.seq; ++s) pos.push_back(static_cast<double>((s * 5 + b * 3) % max_pos));
              in.push_back(const_tensor(DType::I64, {d.b, d.seq}, pos));
            }
            AttributeMap attrs{{"interleaved", attr_i(interleaved)}};
            if (!four_d) attrs["num_heads"] = attr_i(d.heads);
            if (d.rot) attrs["rotary_embedding_dim"] = attr_i(d.rot);
            Case c{"RotaryEmbedding",
                   label(dt, x, fmt::format("rot {}{}{}", rot, interleaved ? " interleaved" : "",
                                            with_pos ? " position_ids" : " per-token cache")),
                   std::move(in), std::move(attrs)};
            c.opset = 23;
            cases.push_back(std::move(c));
          }
}

}  // namespace gpuopt::backend_ops
