// The captured-shape list of the plan cache (backends/captured_shapes.h): signatures round-trip,
// a model's list survives the file and is read back at a warm start, and entries that do not
// parse or do not fit the model are skipped with the reason (the CUDA executor warns and goes
// on); other models' entries are left alone.
#include "backends/captured_shapes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

namespace gpuopt {
namespace {

namespace fs = std::filesystem;

const ShapeSignature kDeclared = {{DType::F16, {-1, 3, 224, 224}}, {DType::I64, {-1}}};  // batch is dynamic

ShapeSignature batch(int64_t n) { return {{DType::F16, {n, 3, 224, 224}}, {DType::I64, {n}}}; }

TEST(CapturedShapes, SignatureTextRoundTrips) {
  const ShapeSignature s = {{DType::F16, {32, 3, 224, 224}}, {DType::I64, {}}, {DType::Bool, {0, 7}}};
  EXPECT_EQ(signature_text(s), "f16[32,3,224,224];i64[];bool[0,7]");
  auto back = parse_signature(signature_text(s));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(captured_shape_key("00aa", batch(8)), "graph 00aa f16[8,3,224,224];i64[8]");
}

TEST(CapturedShapes, MalformedSignaturesAreRefusedWithTheReason) {
  for (const char* bad : {"", "f16", "f16[1,2", "q7[1]", "f16[1,-2]", "f16[1,,2]", "f16[1,2,]", "f16[1];", "f16[x]"}) {
    auto r = parse_signature(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
  EXPECT_NE(parse_signature("f16[1,-2]").status().message().find("dim '-2'"), std::string::npos);
  EXPECT_NE(parse_signature("q7[1]").status().message().find("unknown dtype 'q7'"), std::string::npos);
}

TEST(CapturedShapes, OnlyThisModelsFittingEntriesAreKept) {
  PlanEntries e;
  e[captured_shape_key("aaaa", batch(1))] = "captured";
  e[captured_shape_key("aaaa", batch(32))] = "captured";
  e[captured_shape_key("bbbb", batch(4))] = "captured";  // another model on the same device
  e["conv 1,64,56,56"] = "algo=1";
  e["graph aaaa f16[8,3,224"] = "captured";                          // truncated
  e["graph aaaa f16[8,3,224,224]"] = "captured";                     // one input of two
  e["graph aaaa f32[8,3,224,224];i64[8]"] = "captured";              // dtype
  e["graph aaaa f16[8,3,112,112];i64[8]"] = "captured";              // a fixed dim
  e[captured_shape_key("aaaa", batch(16))] = "maybe";                // value
  std::vector<std::string> skipped;
  const auto got = captured_shapes(e, "aaaa", kDeclared, &skipped);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], batch(1));
  EXPECT_EQ(got[1], batch(32));
  ASSERT_EQ(skipped.size(), 5u);
  std::string all;
  for (const auto& s : skipped) all += s + "\n";
  EXPECT_NE(all.find("graph aaaa f16[8,3,224: 'f16[8,3,224' is not <dtype>[<dims>]"), std::string::npos) << all;
  EXPECT_NE(all.find("1 inputs listed, the model has 2"), std::string::npos) << all;
  EXPECT_NE(all.find("input 0 is f32, the model's is f16"), std::string::npos) << all;
  EXPECT_NE(all.find("input 0 dim 2 is 112, the model fixes it at 224"), std::string::npos) << all;
  EXPECT_NE(all.find("value 'maybe' is not 'captured'"), std::string::npos) << all;
  EXPECT_TRUE(captured_shapes(e, "cccc", kDeclared, &skipped).empty());
}

TEST(CapturedShapes, AListSavedWithThePlansIsReadAtAWarmStart) {
  const fs::path dir = fs::temp_directory_path() / ("gpuopt-captured-shapes-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const PlanCacheKey key{"aaaa", "NVIDIA H200", "13000", "91000", "130000", "0.1.0 test"};
  PlanEntries e{{"conv 1,64", "algo=1"}};
  for (int64_t n : {1, 8, 32}) e[captured_shape_key("aaaa", batch(n))] = std::string(kCapturedValue);
  ASSERT_TRUE(save_plan_cache(dir.string(), key, e).ok());
  const PlanCacheLoad l = load_plan_cache(dir.string(), key);
  ASSERT_EQ(l.state, PlanCacheLoad::State::kWarm) << l.note;
  std::vector<std::string> skipped;
  const auto got = captured_shapes(l.entries, "aaaa", kDeclared, &skipped);
  EXPECT_TRUE(skipped.empty());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], batch(1));
  EXPECT_EQ(got[1], batch(32));  // key order
  EXPECT_EQ(got[2], batch(8));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuopt
