// ONNX Runtime oracle: every case in tests/ops_tensor/data/ (written by gen_cases.py) is one
// node run by onnxruntime on random inputs; here the same node runs through eval_node and each
// output must match (bit-exact for data movement, within the dtype tolerance for arithmetic).
#include "core/npy.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace gpuopt::tensor_test {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() { return fs::path(GPUOPT_SOURCE_DIR) / "tests" / "ops_tensor" / "data"; }

std::vector<std::string> case_names() { return op_test::case_names(data_dir()); }

Tensor load(const fs::path& p) {
  Result<Tensor> t = read_npy(p.string());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

// Ops whose outputs are computed (not moved): compared with a tolerance instead of bit-exact.
bool arithmetic_op(const std::string& op) { return op == "Resize" || op == "Range" || op == "Upsample"; }

class OrtCase : public ::testing::TestWithParam<std::string> {};

TEST_P(OrtCase, MatchesOnnxRuntime) {
  const fs::path dir = data_dir() / GetParam();
  std::ifstream f(dir / "case.json");
  nlohmann::json meta = nlohmann::json::parse(f);
  const std::string op_name = meta["op"];
  std::optional<Op> op = op_from_name(op_name);
  ASSERT_TRUE(op.has_value()) << "op " << op_name << " is not in the op table";
  AttributeMap attrs;
  for (auto& [k, v] : meta["attrs"].items()) {
    if (v.contains("i")) attrs[k] = attr_i(v["i"]);
    else if (v.contains("f")) attrs[k] = attr_f(v["f"]);
    else if (v.contains("s")) attrs[k] = attr_s(v["s"]);
    else if (v.contains("ints")) attrs[k] = attr_ints(v["ints"].get<std::vector<int64_t>>());
    else if (v.contains("floats")) {
      Attribute a;
      a.kind = Attribute::Kind::kFloats;
      a.floats = v["floats"].get<std::vector<float>>();
      attrs[k] = a;
    } else if (v.contains("t")) attrs[k] = attr_t(load(dir / v["t"].get<std::string>()));
  }
  std::vector<Tensor> inputs;
  std::vector<const Tensor*> ptrs;
  inputs.reserve(meta["inputs"].size());
  for (auto& in : meta["inputs"]) inputs.push_back(in.is_null() ? Tensor() : load(dir / in.get<std::string>()));
  for (auto& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  Node n = make_node(*op, inputs.size(), meta["outputs"].size(), attrs, GetParam());
  n.op_type = op_name;
  for (size_t i = 0; i < ptrs.size(); ++i)
    if (!ptrs[i]) n.inputs[i] = kNoValue;
  auto got = eval_node(n, ptrs, meta["opset"].get<int>());
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (size_t i = 0; i < meta["outputs"].size(); ++i) {
    Tensor want = load(dir / meta["outputs"][i].get<std::string>());
    const Tensor& g = (*got)[i];
    if (!arithmetic_op(op_name) || !dtype_is_float(want.dtype())) {
      EXPECT_TRUE(same_tensor(g, want)) << "output " << i;
      continue;
    }
    ASSERT_EQ(g.describe(), want.describe()) << "output " << i;
    const double atol = want.dtype() == DType::F16 ? 2.5e-3 : 1e-5, rtol = want.dtype() == DType::F16 ? 1e-3 : 1e-4;
    for (int64_t e = 0; e < want.numel(); ++e)
      ASSERT_NEAR(g.get_f64(e), want.get_f64(e), atol + rtol * std::fabs(want.get_f64(e))) << "output " << i << " element " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Ort, OrtCase, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(OrtCases, DataIsPresent) { EXPECT_GE(case_names().size(), 40u) << "run tests/ops_tensor/gen_cases.py"; }

}  // namespace
}  // namespace gpuopt::tensor_test
