// ONNX Runtime as the oracle for NN-op configurations the ONNX node tests leave out. The cases
// (inputs + ORT outputs as .npy, op/attrs in case.json) come from tests/ops_nn/gen_ort_cases.py.
#include "core/npy.h"
#include "nn_test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gpuopt {
namespace {

using namespace testing_nn;
namespace fs = std::filesystem;

fs::path data_dir() {
  if (const char* src = std::getenv("GPUOPT_TEST_SOURCE_DIR")) return fs::path(src) / "tests" / "ops_nn" / "data";
  return fs::path(GPUOPT_SOURCE_DIR) / "tests" / "ops_nn" / "data";
}

std::vector<std::string> case_names() { return op_test::case_names(data_dir()); }

Tensor load(const fs::path& p) {
  Result<Tensor> t = read_npy(p.string());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

class OrtNnCase : public ::testing::TestWithParam<std::string> {};

TEST_P(OrtNnCase, MatchesOnnxRuntime) {
  const fs::path dir = data_dir() / GetParam();
  std::ifstream f(dir / "case.json");
  const nlohmann::json meta = nlohmann::json::parse(f);
  const std::optional<Op> op = op_from_name(meta["op"].get<std::string>());
  ASSERT_TRUE(op.has_value()) << meta["op"];
  AttributeMap attrs;
  for (const auto& [k, v] : meta["attrs"].items()) {
    if (v.contains("i"))
      attrs[k] = attr_i(v["i"].get<int64_t>());
    else if (v.contains("f"))
      attrs[k] = attr_f(v["f"].get<float>());
    else if (v.contains("s"))
      attrs[k] = attr_s(v["s"].get<std::string>());
    else if (v.contains("ints"))
      attrs[k] = attr_ints(v["ints"].get<std::vector<int64_t>>());
  }
  std::vector<Tensor> inputs;
  for (const auto& in : meta["inputs"]) inputs.push_back(in.is_null() ? Tensor() : load(dir / in.get<std::string>()));
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  const Node n = make_node(*op, inputs.size(), meta["outputs"].size(), attrs, GetParam());
  auto r = run(n, ptrs, meta["opset"].get<int>());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (size_t i = 0; i < meta["outputs"].size(); ++i) {
    const Tensor want = load(dir / meta["outputs"][i].get<std::string>());
    const Tensor& got = (*r)[i];
    ASSERT_EQ(got.dtype(), want.dtype()) << "output " << i;
    expect_close(got, values(want), want.shape(), GetParam() + " output " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Data, OrtNnCase, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(OrtNnCases, DataPresent) {
  EXPECT_GE(case_names().size(), 30u) << "run tests/ops_nn/gen_ort_cases.py";
}

}  // namespace
}  // namespace gpuopt
