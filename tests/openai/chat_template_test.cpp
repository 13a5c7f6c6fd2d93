// Chat templates through minja: Hugging Face's rendering (trim_blocks, lstrip_blocks) of real
// templates, tokenizer_config.json's forms, and the limits that stop a hostile template.
#include "server/openai/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpuopt::server::openai {
namespace {

using ojson = nlohmann::ordered_json;

// Zephyr's / TinyLlama-Chat's template as published in its tokenizer_config.json.
const char* kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

ojson msgs() {
  return ojson::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
}

std::string config_with(const ojson& chat_template) {
  return ojson({{"bos_token", {{"content", "<s>"}, {"lstrip", false}}}, {"eos_token", "</s>"},
                {"chat_template", chat_template}})
      .dump();
}

TEST(ChatTemplate, ZephyrRendersAsTransformersDoes) {
  auto t = ChatTemplate::from_tokenizer_config(config_with(kZephyr), "tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->bos_token(), "<s>");
  EXPECT_EQ((*t)->eos_token(), "</s>");
  // transformers' apply_chat_template(..., tokenize=False, add_generation_prompt=True) gives this.
  auto out = (*t)->render(msgs(), true);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  auto no_prompt = (*t)->render(msgs(), false);
  ASSERT_TRUE(no_prompt.ok());
  EXPECT_EQ(*no_prompt, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n");
}

TEST(ChatTemplate, Llama2StyleWithBosAndRaiseException) {
  const char* llama2 =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
      "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
      "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}";
  auto t = ChatTemplate::from_tokenizer_config(config_with(llama2), "x");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ojson conv = ojson::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}},
                             {{"role", "user"}, {"content", "c"}}});
  auto out = (*t)->render(conv, true);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "<s>[INST] a [/INST] b </s>[INST] c [/INST]");
  auto bad = (*t)->render(ojson::array({{{"role", "assistant"}, {"content", "x"}}}), true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Conversation roles must alternate"), std::string::npos);
}

TEST(ChatTemplate, NamedTemplateListPicksDefault) {
  ojson list = ojson::array({{{"name", "tool_use"}, {"template", "TOOLS"}}, {{"name", "default"}, {"template", "{{ messages[0].content }}"}}});
  auto t = ChatTemplate::from_tokenizer_config(config_with(list), "x");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*(*t)->render(msgs(), true), "Be brief.");
  EXPECT_EQ(*(*t)->render(msgs(), true, "tool_use"), "TOOLS");
}

TEST(ChatTemplate, MissingMalformedAndWrongTypes) {
  EXPECT_EQ(ChatTemplate::from_tokenizer_config("{\"eos_token\": \"x\"}", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ChatTemplate::from_tokenizer_config("{\"chat_template\": 3}", "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::from_tokenizer_config("not json", "x").status().code(), StatusCode::kInvalidArgument);
  auto unparsable = ChatTemplate::from_tokenizer_config(config_with("{% for x in %}"), "m/tokenizer_config.json");
  ASSERT_FALSE(unparsable.ok());
  EXPECT_NE(unparsable.status().message().find("m/tokenizer_config.json"), std::string::npos);
}

// Hostile templates end with an error, quickly, within memory.
class HostileTemplate : public ::testing::TestWithParam<const char*> {};

TEST_P(HostileTemplate, EndsInAnErrorWithinTheLimits) {
  auto t = ChatTemplate::from_source(GetParam(), "<s>", "</s>", "hostile");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  (*t)->limits.time_limit = std::chrono::milliseconds(1000);
  auto t0 = std::chrono::steady_clock::now();
  auto out = (*t)->render(msgs(), true);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(out.ok()) << "rendered " << out->size() << " bytes";
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("limit"), std::string::npos) << out.status().message();
  EXPECT_LT(secs, 5.0);
  // The same object renders a normal conversation afterwards (nothing left over on the thread).
  auto ok = ChatTemplate::from_source("{{ messages[1].content }}", "", "", "ok");
  EXPECT_EQ(*(*ok)->render(msgs(), true), "Hi");
}

INSTANTIATE_TEST_SUITE_P(
    Templates, HostileTemplate,
    ::testing::Values(
        // Nested loops: 10^12 iterations.
        "{% for i in range(1000000) %}{% for j in range(1000000) %}{{ '' }}{% endfor %}{% endfor %}",
        // A string that doubles 64 times.
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        // Repetition by a huge count.
        "{{ 'abc' * 1000000000000 }}",
        // A count whose product with the length wraps around 2^64.
        "{{ 'abcdefghijklmnop' * 1152921504606846976 }}",
        // A range whose width overflows int64.
        "{{ range(-9223372036854775807, 9223372036854775807) | length }}",
        // A list of 10^12 numbers.
        "{{ range(1000000000000) | length }}",
        // Unbounded recursion.
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        // Output that grows past the limit.
        "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}"));

}  // namespace
}  // namespace gpuopt::server::openai
