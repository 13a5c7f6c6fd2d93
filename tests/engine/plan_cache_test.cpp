// The plan cache file (backends/plan_cache.h) on the CPU: the format round-trips, a corrupted or
// truncated file and a file made for another GPU (or driver, library, gpuopt build) are ignored
// with the reason, and the model hash follows the model's bytes and the session settings.
#include "backends/plan_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace gpuopt {
namespace {

namespace fs = std::filesystem;

PlanCacheKey h200() {
  return PlanCacheKey{"00112233aabbccdd", "NVIDIA H200", "13000", "91000", "130000", "0.1.0 f5ef98b"};
}

PlanEntries sample() {
  return {{"conv 1,64,56,56,64,3,3,56,56,1,1,1,1,1,1,1,f16,nhwc", "algo=1 ws=0 math=1"},
          {"fusedconv 0 1 32,3,224,224,64,7,7,112,112,1,3,3,2,2,1,1,f16,nhwc", "algo=1 ws=4096 math=1 decomposed=0"},
          {"matmul 0 128,768,768,12", "algo=00ff"},
          {"graphs", "f16[32,3,224,224];f16[1,3,224,224]"}};
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fs::path("gpuopt-plan-cache-test-" + std::to_string(::getpid()) + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void write(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

TEST(PlanCache, RoundTripsThroughTheFile) {
  TempDir d;
  EXPECT_EQ(load_plan_cache(d.path.string(), h200()).state, PlanCacheLoad::State::kCold);
  ASSERT_TRUE(save_plan_cache(d.path.string(), h200(), sample()).ok());
  const PlanCacheLoad l = load_plan_cache(d.path.string(), h200());
  EXPECT_EQ(l.state, PlanCacheLoad::State::kWarm) << l.note;
  EXPECT_STREQ(l.state_name(), "warm");
  EXPECT_EQ(l.entries, sample());
  EXPECT_EQ(l.path, (d.path / "00112233aabbccdd.plans").string());
  const std::string text = read(l.path);
  EXPECT_EQ(text.rfind("gpuopt-plan-cache 1\nmodel 00112233aabbccdd\ngpu NVIDIA H200\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nentry matmul 0 128,768,768,12 = algo=00ff\n"), std::string::npos) << text;
  // Saving again replaces the file (no temporary left behind).
  ASSERT_TRUE(save_plan_cache(d.path.string(), h200(), {{"a", "b"}}).ok());
  EXPECT_EQ(load_plan_cache(d.path.string(), h200()).entries, (PlanEntries{{"a", "b"}}));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(PlanCache, CorruptFilesAreIgnoredWithTheReason) {
  TempDir d;
  ASSERT_TRUE(save_plan_cache(d.path.string(), h200(), sample()).ok());
  const std::string path = plan_cache_path(d.path.string(), h200());
  const std::string good = read(path);
  std::string flipped = good;
  flipped[flipped.find("algo=1 ws=0") + 5] = '7';  // one changed choice
  std::string bad_entry = good;
  bad_entry.insert(bad_entry.find("entry"), "garbage line\n");
  const std::pair<std::string, std::string> cases[] = {
      {good.substr(0, good.size() / 2), "truncated"},
      {good.substr(0, good.size() - 1), "no newline"},
      {flipped, "does not match"},
      {bad_entry, "expected 'entry KEY = VALUE'"},
      {"", "not a gpuopt plan cache"},
      {"\x89PNG\r\n", "not a gpuopt plan cache"},
  };
  for (const auto& [text, why] : cases) {
    write(path, text);
    const PlanCacheLoad l = load_plan_cache(d.path.string(), h200());
    EXPECT_EQ(l.state, PlanCacheLoad::State::kCorrupt) << why;
    EXPECT_TRUE(l.entries.empty());
    EXPECT_NE(l.note.find(why), std::string::npos) << l.note;
  }
}

TEST(PlanCache, AFileForAnotherGpuOrBuildIsStale) {
  TempDir d;
  PlanCacheKey a100 = h200();
  a100.gpu = "NVIDIA A100-SXM4-80GB";
  ASSERT_TRUE(save_plan_cache(d.path.string(), a100, sample()).ok());  // same model: same file name
  PlanCacheLoad l = load_plan_cache(d.path.string(), h200());
  EXPECT_EQ(l.state, PlanCacheLoad::State::kStale);
  EXPECT_TRUE(l.entries.empty());
  EXPECT_EQ(l.note, "made for gpu 'NVIDIA A100-SXM4-80GB', this is 'NVIDIA H200'");
  for (auto field : {&PlanCacheKey::driver, &PlanCacheKey::cudnn, &PlanCacheKey::cublas, &PlanCacheKey::gpuopt}) {
    PlanCacheKey other = h200();
    other.*field += "1";
    ASSERT_TRUE(save_plan_cache(d.path.string(), other, sample()).ok());
    EXPECT_EQ(load_plan_cache(d.path.string(), h200()).state, PlanCacheLoad::State::kStale);
  }
}

// How a file another GPU wrote is faked (as an H200 check did): the gpu line rewritten
// and the end line recomputed, as a file the other GPU wrote would be: stale, naming the field.
// The same edit without a matching end line is a changed file: corrupt, never stale.
TEST(PlanCache, AnotherGpusFileIsStaleAndAnEditedHeaderIsCorrupt) {
  TempDir d;
  ASSERT_TRUE(save_plan_cache(d.path.string(), h200(), sample()).ok());
  const std::string path = plan_cache_path(d.path.string(), h200());
  const std::string good = read(path);
  std::string edited = good;
  const std::string from = "\ngpu NVIDIA H200\n", to = "\ngpu NVIDIA A100-SXM4-80GB\n";
  ASSERT_NE(edited.find(from), std::string::npos);
  edited.replace(edited.find(from), from.size(), to);
  const size_t end = edited.rfind("end ");
  std::string resealed = edited.substr(0, end);
  resealed += fmt::format("end {} {:016x}\n", sample().size(), fnv1a64(resealed));

  write(path, resealed);
  PlanCacheLoad l = load_plan_cache(d.path.string(), h200());
  EXPECT_EQ(l.state, PlanCacheLoad::State::kStale) << l.note;
  EXPECT_STREQ(l.state_name(), "stale");
  EXPECT_EQ(l.note, "made for gpu 'NVIDIA A100-SXM4-80GB', this is 'NVIDIA H200'");
  EXPECT_TRUE(l.entries.empty());

  write(path, edited);  // the old end line: the checksum no longer matches
  l = load_plan_cache(d.path.string(), h200());
  EXPECT_EQ(l.state, PlanCacheLoad::State::kCorrupt) << l.note;
  EXPECT_NE(l.note.find("does not match"), std::string::npos) << l.note;

  std::string header_flip = good;  // one bit of the driver line
  header_flip[header_flip.find("\ndriver 13000") + 8] ^= 0x01;
  write(path, header_flip);
  EXPECT_EQ(load_plan_cache(d.path.string(), h200()).state, PlanCacheLoad::State::kCorrupt);

  write(path, good);  // and the untouched file is still warm
  EXPECT_EQ(load_plan_cache(d.path.string(), h200()).state, PlanCacheLoad::State::kWarm);
}

TEST(PlanCache, ModelHashFollowsBytesAndSettings) {
  TempDir d;
  fs::create_directories(d.path);
  const std::string m = (d.path / "m.onnx").string();
  write(m, "model bytes");
  auto a = model_hash(m, "fp16");
  auto b = model_hash(m, "fp32");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 16u);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(*a, *model_hash(m, "fp16"));
  write(m, "model bytes!");
  EXPECT_NE(*a, *model_hash(m, "fp16"));
  EXPECT_FALSE(model_hash((d.path / "missing.onnx").string(), "").ok());
}

TEST(PlanCache, UnwritableDirectoryIsAStatus) {
  const Status s = save_plan_cache("/proc/gpuopt-no-such-dir", h200(), sample());
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace gpuopt
