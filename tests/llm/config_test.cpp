// config.json parsing: the three supported families, their defaults, RoPE scaling as transformers
// computes it, and refusals that name what is wrong.
#include "llm/config.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpuopt::llm {
namespace {

const char* kLlama = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 128, "hidden_size": 64,
  "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
  "bos_token_id": 1, "eos_token_id": [2, 7], "hidden_act": "silu"})";

TEST(LlmConfig, ParsesLlama) {
  auto c = parse_llm_config(kLlama, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, LlmArch::Llama);
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->dtype, DType::BF16);
  EXPECT_EQ(c->bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  // 2 layers x (K and V) x 2 kv heads x 16 x 2 bytes.
  EXPECT_EQ(c->kv_bytes_per_token(DType::F16), 2 * 2 * 2 * 16 * 2);
  // embed 128*64 + lm_head 128*64 + final norm 64 + 2 x (q 64*64 + k,v 2*32*64 + o 64*64 + mlp 3*64*96 + norms 128)
  EXPECT_EQ(c->num_params(), 128 * 64 * 2 + 64 + 2 * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 96 + 128));
}

TEST(LlmConfig, ParsesQwen2WithBiasTiedEmbeddingsAndExplicitHeadDim) {
  auto c = parse_llm_config(R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 50, "hidden_size": 32,
    "intermediate_size": 40, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 24, "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 4096,
    "eos_token_id": 3, "torch_dtype": "float16"})",
                            "q.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, LlmArch::Qwen2);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->head_dim, 24);
  EXPECT_EQ(c->sliding_window, 0);   // Qwen2 windows only with use_sliding_window
  EXPECT_EQ(c->max_position, 2048);  // transformers' default
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{3});
  EXPECT_EQ(c->dtype, DType::F16);
  // No lm_head (tied); q/k/v biases 48 + 24 + 24.
  EXPECT_EQ(c->num_params(), 50 * 32 + 32 + (32 * 48 + 2 * 32 * 24 + 48 * 32 + 3 * 32 * 40 + 64 + 96));
}

TEST(LlmConfig, ParsesMistralSlidingWindowAndDefaults) {
  auto c = parse_llm_config(R"({"architectures": ["MistralForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "sliding_window": 5})",
                            "m.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, LlmArch::Mistral);
  EXPECT_EQ(c->sliding_window, 5);
  EXPECT_EQ(c->num_kv_heads, 2);    // defaults to num_attention_heads
  EXPECT_EQ(c->dtype, DType::F32);  // no torch_dtype: transformers loads float32
  auto none = parse_llm_config(R"({"architectures": ["MistralForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "sliding_window": null})",
                               "m.json");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->sliding_window, 0);
}

TEST(LlmConfig, RopeDefaultAndLinear) {
  std::string j = kLlama;
  j.back() = ',';
  auto c = parse_llm_config(j + R"("rope_scaling": {"type": "linear", "factor": 4.0}})", "c.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::Linear);
  const auto f = c->rope_inv_freq();
  ASSERT_EQ(f.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(f[i], std::pow(500000.0, -2.0 * i / 16) / 4.0) << i;
}

TEST(LlmConfig, RopeLlama3MatchesTransformers) {
  // Llama 3.1 8B's rope: head_dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
  // Expected values: transformers' _compute_llama3_parameters evaluated in float64.
  auto c = parse_llm_config(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 256,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192}})",
                            "c.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const auto f = c->rope_inv_freq();
  ASSERT_EQ(f.size(), 64u);
  EXPECT_NEAR(f[0], 1.0, 1e-15);
  EXPECT_NEAR(f[28], 0.0032114459947525913, 1e-15);  // short wavelength: unchanged
  EXPECT_NEAR(f[29], 0.002166570763503359, 1e-15);   // the smooth band
  EXPECT_NEAR(f[31], 0.0008567514129196324, 1e-15);
  EXPECT_NEAR(f[34], 0.00017850781276799638, 1e-16);
  EXPECT_NEAR(f[35], 9.556212353964683e-05, 1e-17);  // long: divided by 8
  EXPECT_NEAR(f[63], 3.068925988914511e-07, 1e-19);
}

void expect_refused(const std::string& text, const std::string& needle) {
  auto c = parse_llm_config(text, "dir/config.json");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().to_string();
  EXPECT_NE(c.status().message().find("dir/config.json"), std::string::npos) << c.status().to_string();
}

TEST(LlmConfig, RefusesByName) {
  expect_refused(
      R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 10})",
      "'GPT2LMHeadModel' is not supported (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  expect_refused(R"({"vocab_size": 10})", "architectures");
  expect_refused("{not json", "not valid JSON");
  expect_refused(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1})",
                 "'num_attention_heads' is missing");
  expect_refused(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 3})",
                 "not a multiple");
  expect_refused(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3})",
                 "num_key_value_heads 3");
  expect_refused(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": -1, "hidden_size": 8})", "'vocab_size' = -1");
  expect_refused(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": "10"})", "must be an integer");
  const std::string base = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, )";
  expect_refused(base + R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "'yarn' is not supported");
  expect_refused(base + R"("rope_scaling": {"type": "linear", "factor": 0.5}})", "'factor' must be >= 1");
  expect_refused(base + R"("torch_dtype": "int8"})", "'int8' is not supported");
  expect_refused(base + R"("hidden_act": "gelu"})", "hidden_act");
  expect_refused(base + R"("attention_bias": true})", "attention_bias");
  expect_refused(base + R"("eos_token_id": 10})", "'eos_token_id' holds 10");
  expect_refused(base + R"("eos_token_id": [1, "x"]})", "'eos_token_id'");
  expect_refused(base + R"("head_dim": 7})", "head_dim");
}

}  // namespace
}  // namespace gpuopt::llm
