#include "core/check.h"
#include "core/status.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

Status fails() { return Status::InvalidArgument("bad {} of {}", "rank", 3); }
Status passes() { return Status::Ok(); }
Result<int> half_of(int x) {
  if (x % 2) return Status::InvalidArgument("{} is odd", x);
  return x / 2;
}

Status chain(int x, int* out) {
  GPUOPT_RETURN_IF_ERROR(passes());
  GPUOPT_ASSIGN_OR_RETURN(int h, half_of(x));
  GPUOPT_ASSIGN_OR_RETURN(*out, half_of(h));
  return Status::Ok();
}

Status uses_return_if_error() {
  GPUOPT_RETURN_IF_ERROR(fails());
  return Status::Internal("not reached");
}

TEST(Status, FactoriesFormatAndName) {
  Status s = fails();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad rank of 3");
  EXPECT_EQ(s.to_string(), "invalid argument: bad rank of 3");
  EXPECT_EQ(s.with_context("loading 'm.onnx'").message(), "loading 'm.onnx': bad rank of 3");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Status, ReturnIfErrorPropagatesFirstFailure) {
  Status s = uses_return_if_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad rank of 3");
}

TEST(Status, AssignOrReturn) {
  int out = 0;
  EXPECT_TRUE(chain(12, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = chain(6, &out);  // 6 -> 3 -> odd
  EXPECT_EQ(s.message(), "3 is odd");
  EXPECT_EQ(chain(5, &out).message(), "5 is odd");
}

TEST(Status, ResultFromOkStatusIsAnError) {
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

// A library whose calls return an int code, to exercise the one checking macro.
enum FakeLibStatus { kFakeOk = 0, kFakeNoMem = 2 };
std::optional<detail::CallError> call_error(FakeLibStatus s) {
  if (s == kFakeOk) return std::nullopt;
  return detail::CallError{"out of memory (FAKE_NO_MEM)", StatusCode::kOutOfMemory};
}
FakeLibStatus fake_alloc(size_t n) { return n > 100 ? kFakeNoMem : kFakeOk; }

Status alloc_twice(size_t n) {
  GPUOPT_CHECK_CALL(fake_alloc(1));
  GPUOPT_CHECK_CALL(fake_alloc(n));
  return Status::Ok();
}

TEST(CheckCall, NamesTheCallAndTheLibraryError) {
  EXPECT_TRUE(alloc_twice(10).ok());
  Status s = alloc_twice(1000);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(s.message().find("fake_alloc(n) failed: out of memory (FAKE_NO_MEM)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("status_test.cpp"), std::string::npos);
}

TEST(AssertDeathTest, AbortsWithExpression) {
  EXPECT_DEATH(GPUOPT_ASSERT(1 + 1 == 3, "math is {}", "broken"), "assertion '1 \\+ 1 == 3' failed: math is broken");
}

}  // namespace
}  // namespace gpuopt
