// `gpuopt bench` end to end through the binary: exit codes, the no-GPU answers, the report.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct CmdResult {
  int code;
  std::string out;
};

CmdResult run(const std::string& args) {
  const char* bin = std::getenv("GPUOPT_BIN");
  if (!bin) return {-1, "GPUOPT_BIN not set"};
  const std::string cmd = std::string(bin) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(BenchCli, UsageErrorsExitTwo) {
  if (!std::getenv("GPUOPT_BIN")) GTEST_SKIP() << "GPUOPT_BIN not set";
  EXPECT_EQ(run("bench compute --types f99").code, 2);
  EXPECT_EQ(run("bench memory --sizes 1M,abc").code, 2);
  EXPECT_EQ(run("bench memory --sizes 17").code, 2);
  EXPECT_EQ(run("bench roofline --words 6").code, 2);
  EXPECT_EQ(run("bench nonsense").code, 2);
}

TEST(BenchCli, AllWritesAReport) {
  if (!std::getenv("GPUOPT_BIN")) GTEST_SKIP() << "GPUOPT_BIN not set";
  const auto dir = std::filesystem::temp_directory_path() / ("gpuopt_bench_cli_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const CmdResult r = run("bench all -q --json --report " + dir.string() +
                          " --memory-sizes 1M,4M --transfer-sizes 1M --gemm-sizes 256 --cpu-sizes 64,128 --repeat 2");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["sections"].size(), 5u);
  const bool gpu = j["device"]["available"].get<bool>();
  for (const auto& s : j["sections"]) {
    if (s["name"] == "cpu_vs_gpu") {
      // The CPU half runs with or without a GPU: one OpenBLAS row per size.
      int cpu_rows = 0;
      for (const auto& m : s["results"]) {
        if (m["test"] != "cpu_openblas_sgemm") continue;
        ++cpu_rows;
        EXPECT_GT(m["value"].get<double>(), 0);
      }
      EXPECT_EQ(cpu_rows, 2);
    } else if (!gpu) {
      EXPECT_EQ(s["skipped"], "no CUDA device") << s["name"];
    } else {
      EXPECT_TRUE(s["skipped"].is_null()) << s["name"];
      EXPECT_FALSE(s["results"].empty()) << s["name"];
    }
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "bench.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "index.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "cpu_vs_gpu.svg"));
  EXPECT_EQ(std::filesystem::exists(dir / "roofline.svg"), gpu);
  std::ifstream hf(dir / "index.html");
  const std::string html((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  if (!gpu) {
    EXPECT_NE(html.find("skipped: no CUDA device"), std::string::npos);
  }
  EXPECT_NE(html.find("cpu_openblas_sgemm"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(BenchCli, GpuPartsSayWhyTheyAreSkipped) {
  if (!std::getenv("GPUOPT_BIN")) GTEST_SKIP() << "GPUOPT_BIN not set";
  const CmdResult probe = run("bench latency --json -q");
  ASSERT_EQ(probe.code, 0) << probe.out;
  if (nlohmann::json::parse(probe.out)["device"]["available"].get<bool>()) GTEST_SKIP() << "a CUDA device is present";
  for (const char* sub : {"memory", "compute", "roofline --svg ''", "latency"}) {
    const CmdResult r = run(std::string("bench ") + sub + " -q");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("skipped: no CUDA device"), std::string::npos) << sub << ": " << r.out;
  }
}

}  // namespace
