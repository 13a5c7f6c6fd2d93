// Pieces of the conformance runner: one test's execution and comparison, expectations files,
// the docs/ops.md table.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <map>
#include <string>
#include <vector>

namespace gpuopt::conformance {

struct TestCase {
  std::string name;  // "test_abs"
  std::string dir;   // .../node/test_abs
};

struct TestResult {
  std::string name;
  bool passed = false;
  std::string message;           // why it failed (one line)
  std::vector<std::string> ops;  // op types in the model, in node order (may repeat)
  double ms = 0.0;
};

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// Finds the node-test folder of the onnx package in the project's .venv (empty when absent).
std::string default_data_dir();
std::vector<TestCase> list_tests(const std::string& data_dir);

// Loads, runs every test_data_set_* and compares (in this process).
TestResult run_test(const TestCase& tc, const std::string& device);
// The same in a child process, so a crash or hang in a kernel fails only this test.
TestResult run_test_isolated(const TestCase& tc, const std::string& device, int timeout_s);

// Compares one output; the message names the first bad element.
Status compare(const Tensor& expected, const Tensor& actual, const Tolerance& tol);
Tolerance tolerance_for(const std::string& test_name);

struct Expectation {
  std::string reason;
  std::string file;  // "nn.txt"
};
// Reads every *.txt in dir: one `test_name  reason` per line, '#' comments.
Result<std::map<std::string, Expectation>> read_expectations(const std::string& dir);

// The op a test is about (single-node model, base test of an _expanded one, or name match).
std::string main_op(const TestResult& r, const std::map<std::string, const TestResult*>& by_name);
// Writes docs/ops.md from a full run.
Status write_ops_table(const std::string& path, const std::vector<TestResult>& results,
                       const std::map<std::string, Expectation>& expectations);

}  // namespace gpuopt::conformance
