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

// One node of a test's model as the op registries see it: its op, the dtype of its first input
// (of its first output when it has no inputs), and whether the fast CPU backend has a kernel of
// its own for it (cpu_fast::make_fast_kernel; otherwise `--device cpu` runs the reference kernel).
struct NodeForm {
  std::string op;
  std::string dtype;
  bool fast = false;
};

struct TestResult {
  std::string name;
  bool passed = false;
  std::string message;           // why it failed (one line)
  std::vector<std::string> ops;  // op types in the model, in node order (may repeat)
  std::vector<NodeForm> forms;   // the imported graph's nodes (empty when it does not import)
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
// docs/ops.md from a full run: the node-test counts, and per op the dtypes of the CPU reference
// (its passing node tests), of the fast CPU backend's own kernels and of the CUDA kernels
// (tests/backend_ops/cuda_support.txt).
std::string ops_table(const std::vector<TestResult>& results, const std::map<std::string, Expectation>& expectations);
// Writes it to path.
Status write_ops_table(const std::string& path, const std::vector<TestResult>& results,
                       const std::map<std::string, Expectation>& expectations);

}  // namespace gpuopt::conformance
