// KServe v2 codec: every datatype through JSON and the binary extension, and malformed input.
#include <gtest/gtest.h>

#include <random>

#include "server/kserve.h"

namespace gpuopt::server {
namespace {

Tensor random_tensor(DType dt, Shape shape, std::mt19937& rng, bool ascii = false) {
  Tensor t = Tensor::empty(dt, shape);
  if (dt == DType::String) {
    for (size_t i = 0; i < t.strings().size(); ++i) {
      std::string s(rng() % 7, 'a');
      for (auto& c : s)
        c = ascii ? static_cast<char>('a' + rng() % 26)
                  : static_cast<char>(rng() % 256);  // binary: any byte, incl. NUL
      t.strings()[i] = s;
    }
    return t;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v;
    if (dt == DType::Bool)
      v = rng() % 2;
    else if (dtype_is_float(dt))
      v = std::uniform_real_distribution<double>(-100, 100)(rng);
    else if (dt == DType::U8 || dt == DType::U16 || dt == DType::U32 || dt == DType::U64)
      v = rng() % 200;
    else
      v = static_cast<double>(static_cast<int>(rng() % 200) - 100);
    t.set_f64(i, v);
  }
  return t;
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  if (a.dtype() == DType::String) {
    EXPECT_EQ(a.strings(), b.strings()) << what;
    return;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (a.dtype() == DType::F32) {
      // JSON prints the shortest form that reads back to the same float.
      ASSERT_EQ(a.get_f64(i), b.get_f64(i)) << what << " element " << i;
    } else {
      ASSERT_EQ(a.get_f64(i), b.get_f64(i)) << what << " element " << i;
    }
  }
}

class Codec : public ::testing::TestWithParam<bool> {};

TEST_P(Codec, EveryDatatypeRoundTrips) {
  bool binary = GetParam();
  std::mt19937 rng(7);
  std::vector<DType> all = {DType::Bool, DType::U8,  DType::U16, DType::U32,  DType::U64, DType::I8,  DType::I16,
                            DType::I32,  DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64, DType::String};
  std::vector<std::pair<std::string, Tensor>> in;
  for (DType d : all)
    in.emplace_back(std::string("x_") + std::string(dtype_kserve_name(d)),
                    random_tensor(d, {2, 3}, rng, /*ascii=*/!binary));
  size_t hlen = 0;
  std::string body = encode_infer_request(in, binary, binary, "req-1", &hlen);
  auto r = decode_infer_request(body, binary ? std::optional<size_t>(hlen) : std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->id, "req-1");
  EXPECT_EQ(r->binary_output_default, binary);
  ASSERT_EQ(r->inputs.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(r->inputs[i].name, in[i].first);
    expect_same(in[i].second, r->inputs[i].tensor, in[i].first);
  }
  // Responses: alternate binary and JSON outputs in one answer.
  std::vector<bool> bin;
  for (size_t i = 0; i < in.size(); ++i)
    bin.push_back(binary && (i % 2 == 0 || in[i].second.dtype() == DType::String));  // JSON strings must be UTF-8
  EncodedResponse enc = encode_infer_response({"m", "1", "req-1"}, in, bin);
  EXPECT_EQ(enc.binary, binary);
  auto back = decode_infer_response(enc.body, enc.binary ? std::optional<size_t>(enc.json_length) : std::nullopt);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) expect_same(in[i].second, (*back)[i].second, "response " + in[i].first);
}

INSTANTIATE_TEST_SUITE_P(JsonAndBinary, Codec, ::testing::Values(false, true));

TEST(Codec, NestedJsonDataAndParameters) {
  auto r = decode_infer_request(
      R"({"id":"7","parameters":{"timeout":1500,"priority":2},"inputs":[{"name":"x","datatype":"INT32","shape":[2,2],"data":[[1,2],[3,4]]}],
          "outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs[0].tensor.get_i64(3), 4);
  EXPECT_EQ(*r->timeout_us, 1500u);
  EXPECT_EQ(*r->priority, 2u);
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_TRUE(*r->outputs[0].binary);
  EXPECT_FALSE(r->outputs[1].binary.has_value());
}

TEST(Codec, MalformedRequestsAreClearErrors) {
  struct Case {
    std::string body;
    std::optional<size_t> hlen;
    const char* want;
  };
  std::string bin_hdr =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  std::vector<Case> cases = {
      {"{", std::nullopt, "not valid JSON"},
      {"[]", std::nullopt, "must be an object"},
      {R"({"inputs":[]})", std::nullopt, "non-empty 'inputs'"},
      {R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", std::nullopt, "no 'name'"},
      {R"({"inputs":[{"name":"x","datatype":"FP99","shape":[1],"data":[1]}]})", std::nullopt,
       "unknown datatype 'FP99'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]})", std::nullopt,
       "needs 3 elements but 'data' has 2"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})", std::nullopt, "non-negative"},
      {R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]})", std::nullopt, "out of range"},
      {R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1.5]}]})", std::nullopt, "not an integer"},
      {R"({"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[1]}]})", std::nullopt, "not a boolean"},
      {R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":[1]}]})", std::nullopt, "not a string"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1000000000000],"data":[1]}]})", std::nullopt,
       "needs 1000000000000 elements"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296,4294967296],"data":[1]}]})",
       std::nullopt, "too large"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})",
       std::nullopt, "given twice"},
      {bin_hdr + std::string(4, '\0'), bin_hdr.size(), "runs past the end"},
      {bin_hdr + std::string(12, '\0'), bin_hdr.size(), "4 bytes after the JSON header"},
      {bin_hdr, bin_hdr.size() + 5, "larger than the body"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]})" +
           std::string(8, '\0'),
       std::string(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]})")
           .size(),
       "needs 12 bytes"},
      {R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})" +
           std::string("\x09\0\0\0ab", 6),
       std::string(R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})")
           .size(),
       "claims 9 bytes"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"parameters":{"sequence_id":3}})",
       std::nullopt, "sequence"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"outputs":[{"name":"y","parameters":{"classification":2}}]})",
       std::nullopt, "classification"},
  };
  for (const auto& c : cases) {
    auto r = decode_infer_request(c.body, c.hlen);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << "got: " << r.status().message() << "\nfor: " << c.body;
  }
}

}  // namespace
}  // namespace gpuopt::server
