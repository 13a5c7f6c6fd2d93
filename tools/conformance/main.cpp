// gpuopt_conformance: runs the ONNX backend node tests shipped in the pinned onnx package.
//
//   build-x/gpuopt_conformance --filter test_conv        # one family; one line per test
//   build-x/gpuopt_conformance -j 2 --quiet              # everything, failures and summary only
//   build-x/gpuopt_conformance -j 2 --ops-table docs/ops.md        # the op support table (cpu-ref run)
//   build-x/gpuopt_conformance -j 2 --check-ops-table docs/ops.md  # exit 1 when that file is stale
//
// Exit 0 when every test behaves as expected: passes, or fails and is listed in
// tools/conformance/expectations/*.txt. Unexpected failures and unexpected passes exit 1.
#include "conformance.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <sstream>
#include <mutex>
#include <thread>

using namespace gpuopt;
using namespace gpuopt::conformance;

namespace {

enum class Outcome { kPass, kFail, kExpectedFail, kUnexpectedPass, kSkipped };

const char* outcome_tag(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "PASS ";
    case Outcome::kFail: return "FAIL ";
    case Outcome::kExpectedFail: return "XFAIL";
    case Outcome::kUnexpectedPass: return "XPASS";
    case Outcome::kSkipped: return "SKIP ";
  }
  return "?";
}

bool is_skip(const Expectation& e) { return e.reason.rfind("skip", 0) == 0; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run the ONNX backend node tests on a gpuopt backend", "gpuopt_conformance"};
  std::string data_dir, exp_dir = std::string(GPUOPT_SOURCE_DIR) + "/tools/conformance/expectations";
  std::vector<std::string> filters;
  std::string device = "cpu", ops_table_path, check_path;
  bool list = false, hint = false, json = false, quiet = false;
  int jobs = 1, timeout_s = 60;
  app.add_option("--data-dir", data_dir, "Node-test folder (default: the onnx package in ./.venv)");
  app.add_option("--expectations", exp_dir, "Folder of expectation files (*.txt)");
  app.add_option("--filter", filters, "Run tests whose name contains SUBSTR (repeatable: any of them)");
  app.add_option("--device", device, "Backend: cpu (the fast CPU backend), cpu-ref (the reference kernels), or cuda when built in");
  app.add_option("-j,--jobs", jobs, "Tests run in parallel (each in its own process)")->check(CLI::Range(1, 256));
  app.add_option("--timeout", timeout_s, "Seconds one test may take")->check(CLI::Range(1, 3600));
  app.add_flag("--list", list, "List the tests (and their expectations) without running them");
  app.add_flag("--update-expectations-hint", hint, "Print expectation lines to paste for unexpected results");
  app.add_flag("--json", json, "Print results as JSON");
  app.add_flag("--quiet", quiet, "Print only unexpected results and the summary");
  app.add_option("--ops-table", ops_table_path, "Write the op support table (docs/ops.md) from this run");
  app.add_option("--check-ops-table", check_path,
                 "Compare the op support table of this run with this file (docs/ops.md); exit 1 when it differs");
  CLI11_PARSE(app, argc, argv);

  const bool table = !ops_table_path.empty() || !check_path.empty();
  // The table's node-test counts are the reference backend's (docs/ops.md says so).
  if (table && app.count("--device") == 0) device = "cpu-ref";
  if (table && device != "cpu-ref") {
    fmt::print(stderr, "gpuopt_conformance: error: --ops-table and --check-ops-table run on --device cpu-ref\n");
    return 2;
  }
  if (data_dir.empty()) data_dir = default_data_dir();
  if (data_dir.empty()) {
    fmt::print(stderr, "gpuopt_conformance: error: no onnx node tests found under .venv; pass --data-dir\n");
    return 2;
  }
  auto exp = read_expectations(exp_dir);
  if (!exp.ok()) {
    fmt::print(stderr, "gpuopt_conformance: error: {}\n", exp.status().to_string());
    return 2;
  }
  std::vector<TestCase> tests;
  for (auto& t : list_tests(data_dir)) {
    bool match = filters.empty();
    for (const auto& f : filters) match = match || t.name.find(f) != std::string::npos;
    if (match) tests.push_back(std::move(t));
  }
  if (tests.empty()) {
    fmt::print(stderr, "gpuopt_conformance: error: no test matches (data: {})\n", data_dir);
    return 2;
  }
  if (table && !filters.empty()) {
    fmt::print(stderr, "gpuopt_conformance: error: --ops-table and --check-ops-table need a full run (no --filter)\n");
    return 2;
  }
  if (list) {
    for (const auto& t : tests) {
      auto it = exp->find(t.name);
      fmt::print("{}{}\n", t.name, it == exp->end() ? "" : fmt::format("  [{}] {}", it->second.file, it->second.reason));
    }
    return 0;
  }

  std::vector<TestResult> results(tests.size());
  std::vector<Outcome> outcomes(tests.size(), Outcome::kSkipped);
  std::vector<bool> done(tests.size(), false);
  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t printed = 0;
  auto classify = [&](size_t i) {
    auto it = exp->find(tests[i].name);
    const bool expected_fail = it != exp->end();
    if (results[i].passed) return expected_fail ? Outcome::kUnexpectedPass : Outcome::kPass;
    return expected_fail ? Outcome::kExpectedFail : Outcome::kFail;
  };
  auto print_ready = [&] {  // in test order, as soon as the prefix is complete
    while (printed < tests.size() && done[printed]) {
      const size_t i = printed++;
      const Outcome o = outcomes[i];
      if (json || (quiet && (o == Outcome::kPass || o == Outcome::kExpectedFail || o == Outcome::kSkipped))) continue;
      std::string detail;
      auto it = exp->find(tests[i].name);
      if (o == Outcome::kPass) detail = fmt::format("({:.1f} ms)", results[i].ms);
      else if (o == Outcome::kFail) detail = results[i].message;
      else if (o == Outcome::kExpectedFail) detail = fmt::format("expected: {}", it->second.reason);
      else if (o == Outcome::kUnexpectedPass) detail = fmt::format("passes but {} lists it: {}", it->second.file, it->second.reason);
      else detail = it->second.reason;
      fmt::print("{} {}  {}\n", outcome_tag(o), tests[i].name, detail);
      std::fflush(stdout);
    }
  };
  auto worker = [&] {
    for (size_t i; (i = next++) < tests.size();) {
      auto it = exp->find(tests[i].name);
      TestResult r;
      Outcome o = Outcome::kSkipped;
      if (it != exp->end() && is_skip(it->second)) {
        r.name = tests[i].name;
        r.message = it->second.reason;
      } else {
        r = run_test_isolated(tests[i], device, timeout_s);
      }
      std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(r);
      if (!(it != exp->end() && is_skip(it->second))) o = classify(i);
      outcomes[i] = o;
      done[i] = true;
      print_ready();
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < jobs; ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  int passed = 0, failed = 0, skipped = 0, xfail = 0, unexpected_fail = 0, xpass = 0;
  for (Outcome o : outcomes) {
    if (o == Outcome::kPass || o == Outcome::kUnexpectedPass) ++passed;
    if (o == Outcome::kFail || o == Outcome::kExpectedFail) ++failed;
    if (o == Outcome::kSkipped) ++skipped;
    if (o == Outcome::kExpectedFail) ++xfail;
    if (o == Outcome::kFail) ++unexpected_fail;
    if (o == Outcome::kUnexpectedPass) ++xpass;
  }
  if (json) {
    nlohmann::json j;
    j["device"] = device;
    for (size_t i = 0; i < tests.size(); ++i)
      j["tests"].push_back({{"name", tests[i].name},
                            {"outcome", std::string(outcome_tag(outcomes[i])).substr(0, 5)},
                            {"passed", results[i].passed},
                            {"ms", results[i].ms},
                            {"message", results[i].message},
                            {"ops", results[i].ops}});
    j["summary"] = {{"passed", passed},         {"failed", failed},          {"skipped", skipped},
                    {"expected_failures", xfail}, {"unexpected_failures", unexpected_fail}, {"unexpected_passes", xpass}};
    fmt::print("{}\n", j.dump(1));
  }
  if (hint && (unexpected_fail || xpass)) {
    fmt::print("\n# lines to add to tools/conformance/expectations/<family>.txt (check each reason):\n");
    for (size_t i = 0; i < tests.size(); ++i)
      if (outcomes[i] == Outcome::kFail) {
        std::string why = results[i].message.substr(0, 160);
        fmt::print("{}  {}\n", tests[i].name, why);
      }
    for (size_t i = 0; i < tests.size(); ++i)
      if (outcomes[i] == Outcome::kUnexpectedPass)
        fmt::print("# remove from {}: {}\n", exp->at(tests[i].name).file, tests[i].name);
  }
  if (!ops_table_path.empty()) {
    Status st = write_ops_table(ops_table_path, results, *exp);
    if (!st.ok()) {
      fmt::print(stderr, "gpuopt_conformance: error: {}\n", st.to_string());
      return 1;
    }
  }
  bool stale = false;
  if (!check_path.empty()) {
    std::ifstream in(check_path);
    const std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string want = ops_table(results, *exp);
    if (!in.is_open() || have != want) {
      stale = true;
      // The first line that differs, so the reason is visible in the CTest log.
      std::istringstream a(have), b(want);
      std::string la, lb;
      int line = 0;
      while (true) {
        ++line;
        const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
        if (!ga && !gb) break;
        if (!ga || !gb || la != lb) break;
      }
      fmt::print(stderr,
                 "gpuopt_conformance: error: '{}' is stale (line {}: has '{}', this run gives '{}'); regenerate it: "
                 "build/gpuopt_conformance -j 2 --ops-table docs/ops.md\n",
                 check_path, line, la, lb);
    }
  }
  // The last line is the contract: `N passed, N failed, N skipped`.
  auto& out = json ? stderr : stdout;
  fmt::print(out, "{} expected failures, {} unexpected failures, {} unexpected passes\n", xfail, unexpected_fail, xpass);
  fmt::print(out, "{} passed, {} failed, {} skipped\n", passed, failed, skipped);
  return unexpected_fail || xpass || stale ? 1 : 0;
}
