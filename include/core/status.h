// Status and Result<T>: recoverable errors (bad model, bad request, out of memory, no driver)
// travel as values and reach the user as one line. Programmer bugs use GPUOPT_ASSERT instead.
//
//   Result<Tensor> load(const std::string& path) {
//     if (!exists(path)) return Status::NotFound("model file '{}' does not exist", path);
//     GPUOPT_ASSIGN_OR_RETURN(auto bytes, read_file(path));
//     ...
//   }
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gpuopt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad input from the user: model, request, flag
  kNotFound,          // file, model, tensor or symbol that does not exist
  kUnimplemented,     // valid input we do not support (unknown op, dtype)
  kOutOfMemory,       // an allocation failed; the caller may retry smaller
  kUnavailable,       // no driver, no device, queue full, shutting down
  kDeadlineExceeded,  // timed out
  kAlreadyExists,
  kFailedPrecondition,
  kInternal,          // a library call failed unexpectedly
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
#define GPUOPT_STATUS_FACTORY(Name, Code)                                         \
  template <typename... Args>                                                     \
  static Status Name(fmt::format_string<Args...> f, Args&&... args) {             \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...)); \
  }
  GPUOPT_STATUS_FACTORY(InvalidArgument, kInvalidArgument)
  GPUOPT_STATUS_FACTORY(NotFound, kNotFound)
  GPUOPT_STATUS_FACTORY(Unimplemented, kUnimplemented)
  GPUOPT_STATUS_FACTORY(OutOfMemory, kOutOfMemory)
  GPUOPT_STATUS_FACTORY(Unavailable, kUnavailable)
  GPUOPT_STATUS_FACTORY(DeadlineExceeded, kDeadlineExceeded)
  GPUOPT_STATUS_FACTORY(AlreadyExists, kAlreadyExists)
  GPUOPT_STATUS_FACTORY(FailedPrecondition, kFailedPrecondition)
  GPUOPT_STATUS_FACTORY(Internal, kInternal)
#undef GPUOPT_STATUS_FACTORY

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: [Conv] node 'conv1': ..." — the one line a user sees.
  std::string to_string() const;
  // Adds context in front: "loading 'm.onnx': <message>".
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline Status to_status(Status s) { return s; }
template <typename T>
Status to_status(const Result<T>& r) { return r.status(); }
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace gpuopt

#define GPUOPT_CONCAT_INNER(a, b) a##b
#define GPUOPT_CONCAT(a, b) GPUOPT_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` (a Status or Result) failed.
#define GPUOPT_RETURN_IF_ERROR(expr)                                         \
  do {                                                                       \
    ::gpuopt::Status _gpuopt_st = ::gpuopt::detail::to_status((expr));       \
    if (!_gpuopt_st.ok()) return _gpuopt_st;                                 \
  } while (0)

// GPUOPT_ASSIGN_OR_RETURN(auto x, make_x()): declares x from a Result or returns its Status.
#define GPUOPT_ASSIGN_OR_RETURN(lhs, expr) \
  GPUOPT_ASSIGN_OR_RETURN_IMPL(GPUOPT_CONCAT(_gpuopt_r_, __LINE__), lhs, expr)
#define GPUOPT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// Programmer bugs: abort with file, line and expression.
#define GPUOPT_ASSERT(cond, ...)                                                            \
  do {                                                                                      \
    if (!(cond)) ::gpuopt::detail::assert_fail(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)
