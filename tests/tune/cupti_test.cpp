// profile's CUPTI capture (src/profile/cuda/cupti.cpp) against a fake libcupti
// (tests/tune/fake_cupti/): loading by dlopen, the buffer callbacks, reading kernel records
// (names demangled, other kinds skipped, dropped records counted), both clocks ending on the
// steady one, and one-line errors. CUDA builds only (the fake is built against cupti.h); the real
// CUPTI on a GPU is scripts/gpu/profile_kernels.sh.
#include "profile/kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace gpuopt::profile {
namespace {

std::string fake_cupti() {
  const char* dir = std::getenv("GPUOPT_TEST_BINARY_DIR");
  const std::string p = dir ? std::string(dir) + "/tests/libfake_cupti.so" : "";
  return !p.empty() && std::filesystem::exists(p) ? p : "";
}

// A control function of the fake, by name.
template <typename Fn>
Fn fake_control(const std::string& lib, const char* name) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);  // the handle the capture got: the same globals
  return h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
}

void expect_fake_kernels(const std::vector<KernelRecord>& k, double before, double after) {
  ASSERT_EQ(k.size(), 3u);  // the memcpy record among them is not a kernel
  EXPECT_EQ(k[0].name, "square(float*, int)");
  EXPECT_EQ(k[1].name, "square(float*, int)");
  EXPECT_EQ(k[2].name, "gemm_kernel_plain");
  for (size_t i = 0; i < k.size(); ++i) {
    // The fake runs kernel i at enable + 10 us + 20 us * i for 5 us; the enable is inside
    // [before, after], so on the steady clock the kernel is inside [before + 10, after + 50].
    EXPECT_GE(k[i].start_us, before + 10 + 20.0 * static_cast<double>(i) - 0.5) << i;
    EXPECT_LE(k[i].start_us, after + 50) << i;
    EXPECT_NEAR(k[i].dur_us, 5, 1e-9);
    EXPECT_EQ(k[i].correlation, 100 + i);
    EXPECT_EQ(k[i].grid, (std::array<int, 3>{64, 1, 1}));
    EXPECT_EQ(k[i].block, (std::array<int, 3>{256, 1, 1}));
    EXPECT_EQ(k[i].node, -1);  // not given to a node yet: attach_kernels does that
    if (i) {
      EXPECT_NEAR(k[i].start_us - k[i - 1].start_us, 20, 1e-3);
    }
  }
  EXPECT_EQ(k[0].stream, 7u);
  EXPECT_EQ(k[2].stream, 9u);
}

TEST(ProfileCupti, KernelRecordsOnTheSteadyClock) {
  const std::string lib = fake_cupti();
  if (lib.empty()) GTEST_SKIP() << "no fake CUPTI here (a build without CUDA)";
  const double before = now_us();
  auto cap = KernelCapture::start(lib);
  ASSERT_TRUE(cap.ok()) << cap.status().to_string();
  EXPECT_FALSE(KernelCapture::start(lib).ok());  // one capture at a time, and the refused one
  auto recording = fake_control<int (*)()>(lib, "fake_cupti_recording");
  ASSERT_NE(recording, nullptr);
  EXPECT_TRUE(recording());  // stopped nothing of the first
  std::string note;
  auto k = (*cap)->finish(&note);
  const double after = now_us();
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  expect_fake_kernels(*k, before, after);
  EXPECT_NE(note.find("CUPTI dropped 2 kernel record(s)"), std::string::npos) << note;
}

TEST(ProfileCupti, RecordsOnCuptisOwnClockAreMovedOntoOurs) {
  const std::string lib = fake_cupti();
  if (lib.empty()) GTEST_SKIP() << "no fake CUPTI here (a build without CUDA)";
  auto mode = fake_control<void (*)(int)>(lib, "fake_cupti_timestamp_callback");
  ASSERT_NE(mode, nullptr);
  // 1: the timestamp callback is refused (an offset to CUPTI's clock is measured);
  // 2: it is taken but the records stay on the realtime clock (caught when they come back).
  for (int m : {1, 2}) {
    mode(m);
    const double before = now_us();
    auto cap = KernelCapture::start(lib);
    ASSERT_TRUE(cap.ok()) << cap.status().to_string();
    std::string note;
    auto k = (*cap)->finish(&note);
    const double after = now_us();
    mode(0);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    expect_fake_kernels(*k, before, after);
    EXPECT_EQ(note.find("realtime clock") != std::string::npos, m == 2) << m << ": " << note;
  }
}

TEST(ProfileCupti, ErrorsAreOneLine) {
  auto missing = KernelCapture::start("/nonexistent/libcupti.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  const std::string why = missing.status().message();
#if GPUOPT_HAVE_CUDA  // names the library (or, built without cupti.h, says so)
  EXPECT_TRUE(why.find("/nonexistent/libcupti.so") != std::string::npos || why.find("CUPTI's headers") != std::string::npos)
      << why;
#else
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
  EXPECT_EQ(why.find('\n'), std::string::npos);

  const std::string lib = fake_cupti();
  if (lib.empty()) GTEST_SKIP() << "no fake CUPTI here (a build without CUDA)";
  auto fail = fake_control<void (*)(int)>(lib, "fake_cupti_fail_enable");
  ASSERT_NE(fail, nullptr);
  fail(35);  // any CUPTI error: another profiler holding CUPTI, say
  auto refused = KernelCapture::start(lib);
  fail(0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("refused kernel activity records"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find('\n'), std::string::npos);
  // A refusal leaves nothing held: the next capture starts.
  auto again = KernelCapture::start(lib);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  std::string note;
  EXPECT_TRUE((*again)->finish(&note).ok());
}

}  // namespace
}  // namespace gpuopt::profile
