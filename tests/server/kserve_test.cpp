// KServe v2 codec: every datatype through JSON and the binary extension, and malformed input.
#include <gtest/gtest.h>

#include <cmath>
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

std::string nested_data(size_t depth) {
  return R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + std::string(depth, '[') + "1" +
         std::string(depth, ']') + "}]}";
}

TEST(CodecLimits, DeepNestingIsAnErrorNotACrash) {
  // 100,000 levels once overflowed the stack of a recursive flatten(); now the depth limit answers.
  for (size_t depth : {size_t{100000}, kMaxJsonDepth + 1}) {
    auto r = decode_infer_request(nested_data(depth), std::nullopt);
    ASSERT_FALSE(r.ok()) << depth;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("more than 64 levels deep"), std::string::npos) << r.status().message();
  }
  // Outside `data` too (parameters, unknown keys).
  std::string deep_params = R"({"parameters":{"x":)" + std::string(200000, '[') + std::string(200000, ']') +
                            R"(},"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})";
  auto r = decode_infer_request(deep_params, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("levels deep"), std::string::npos) << r.status().message();
  // Just under the limit is fine: the root object, "inputs", the input object and 61 arrays.
  auto ok = decode_infer_request(nested_data(kMaxJsonDepth - 3), std::nullopt);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->inputs[0].tensor.get_f64(0), 1.0);
}

TEST(CodecLimits, TensorsElementsAndMemoryHaveLimits) {
  DecodeLimits lim;
  lim.max_tensors = 2;
  std::string three = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]},
      {"name":"b","datatype":"FP32","shape":[1],"data":[1]},{"name":"c","datatype":"FP32","shape":[1],"data":[1]}]})";
  auto r = decode_infer_request(three, std::nullopt, lim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 2 tensors"), std::string::npos) << r.status().message();

  lim = DecodeLimits{};
  lim.max_elements_per_tensor = 3;
  // Typed (datatype and shape first) and compact (data first) both stop at the limit.
  for (const char* body :
       {R"({"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]})",
        R"({"inputs":[{"data":[1,2,3,4],"name":"a","datatype":"FP32","shape":[4]}]})",
        R"({"inputs":[{"name":"a","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}]})"}) {
    std::string b = body;
    std::optional<size_t> hlen;
    if (b.find("binary_data_size") != std::string::npos) {
      hlen = b.size();
      b += std::string(16, '\0');
    }
    auto e = decode_infer_request(b, hlen, lim);
    ASSERT_FALSE(e.ok()) << body;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("more than 3 elements"), std::string::npos) << e.status().message();
  }

  lim = DecodeLimits{};
  lim.max_memory_bytes = 1000;
  std::string big = R"({"inputs":[{"name":"a","datatype":"FP64","shape":[200],"data":[)";
  for (int i = 0; i < 200; ++i) big += i ? ",1" : "1";
  big += "]}]}";
  auto m = decode_infer_request(big, std::nullopt, lim);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(m.status().message().find("--max-request-memory"), std::string::npos) << m.status().message();
  lim.max_memory_bytes = 1 << 20;
  auto fits = decode_infer_request(big, std::nullopt, lim);
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  EXPECT_GE(fits->memory_bytes, 1600u);  // the tensor's bytes at least
}

TEST(CodecLimits, AmplifyingStructuresAreRefusedWhileParsed) {
  // Bodies whose JSON is mostly structure (empty objects, empty arrays, long shapes) are refused
  // as they are read, before the DOM they describe is built: every value is charged at what it
  // takes before it is added, against the structure limit.
  const std::string in = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]}],)";
  std::string outputs = in + R"("outputs":[)";
  for (int i = 0; i < 2000; ++i) outputs += i ? ",{}" : "{}";
  outputs += "]}";
  auto o = decode_infer_request(outputs, std::nullopt);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("more than 1024 tensors in 'outputs'"), std::string::npos)
      << o.status().message();

  DecodeLimits lim;
  lim.max_structure_bytes = 64 << 10;
  std::string params = R"({"parameters":{"p":[)";
  for (int i = 0; i < 5000; ++i) params += i ? ",[]" : "[]";
  params += "]}," + in.substr(1, in.size() - 2) + "}";  // `in` without its '{' and trailing ',
  auto p = decode_infer_request(params, std::nullopt, lim);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kOutOfMemory);  // 413
  EXPECT_NE(p.status().message().find("besides tensor data needs more than 65536 bytes"), std::string::npos)
      << p.status().message();
  // The same with room for it decodes (the limit is what refused it).
  lim.max_structure_bytes = 4 << 20;
  EXPECT_TRUE(decode_infer_request(params, std::nullopt, lim).ok());

  std::string shape = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[)";
  for (int i = 0; i < 100000; ++i) shape += i ? ",0" : "0";
  shape += R"(],"data":[]}]})";
  auto sh = decode_infer_request(shape, std::nullopt);
  ASSERT_FALSE(sh.ok());
  EXPECT_NE(sh.status().message().find("'shape' of more than 16 dims"), std::string::npos) << sh.status().message();
}

TEST(CodecLimits, ServerWideBudgetIsTakenAndGivenBack) {
  DecodeLimits lim;
  lim.inflight = std::make_shared<net::ByteBudget>(size_t{3} << 20);
  std::string body = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"data":[1,2]}]})";
  {
    auto a = decode_infer_request(body, std::nullopt, lim);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(lim.inflight->used(), size_t{1} << 20);  // one 1 MiB step
    auto b = decode_infer_request(body, std::nullopt, lim);
    auto c = decode_infer_request(body, std::nullopt, lim);
    ASSERT_TRUE(b.ok() && c.ok());
    auto d = decode_infer_request(body, std::nullopt, lim);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(d.status().message().find("--max-inflight-bytes"), std::string::npos) << d.status().message();
  }
  EXPECT_EQ(lim.inflight->used(), 0u);  // every hold dropped; failures never kept any
}

TEST(CodecLimits, FloatsBeyondTheirRangeAreRefused) {
  struct Case {
    const char* type;
    const char* value;
    bool ok;
  };
  for (const Case& c :
       {Case{"FP32", "1e300", false}, Case{"FP32", "-1e39", false}, Case{"FP32", "3.4e38", true},
        Case{"FP16", "70000", false}, Case{"FP16", "65504", true}, Case{"BF16", "1e39", false},
        Case{"BF16", "3e38", true}, Case{"FP64", "1e300", true}, Case{"UINT8", "256", false},
        Case{"INT16", "-32769", false}, Case{"UINT64", "-1", false}, Case{"INT64", "9223372036854775808", false}}) {
    for (bool data_first : {false, true}) {
      std::string body = data_first
                             ? fmt::format(R"({{"inputs":[{{"data":[0,{}],"name":"x","datatype":"{}","shape":[2]}}]}})",
                                           c.value, c.type)
                             : fmt::format(R"({{"inputs":[{{"name":"x","datatype":"{}","shape":[2],"data":[0,{}]}}]}})",
                                           c.type, c.value);
      auto r = decode_infer_request(body, std::nullopt);
      if (c.ok) {
        ASSERT_TRUE(r.ok()) << body << ": " << r.status().to_string();
        EXPECT_TRUE(std::isfinite(r->inputs[0].tensor.get_f64(1))) << body;
        continue;
      }
      ASSERT_FALSE(r.ok()) << body;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      std::string want = fmt::format("input 'x': element 1 (");
      EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find(std::string("out of range for ") + c.type), std::string::npos)
          << r.status().message();
    }
  }
  // A number no double holds is not JSON the parser accepts: still a 400 that says why.
  auto r =
      decode_infer_request(R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[1e400]}]})", std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not valid JSON: number overflow parsing '1e400'"), std::string::npos)
      << r.status().message();
}

TEST(CodecLimits, DataBeforeShapeMatchesDataAfterShape) {
  // The compact path (data first) and the typed path give the same tensors and the same errors.
  std::string typed =
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[2,2],"data":[[1,-2],[9223372036854775807,4]]},
                         {"name":"s","datatype":"BYTES","shape":[2],"data":["ab",""]}]})";
  std::string compact =
      R"({"inputs":[{"data":[[1,-2],[9223372036854775807,4]],"shape":[2,2],"datatype":"INT64","name":"x"},
                           {"data":["ab",""],"datatype":"BYTES","name":"s","shape":[2]}]})";
  auto a = decode_infer_request(typed, std::nullopt);
  auto b = decode_infer_request(compact, std::nullopt);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  for (size_t i = 0; i < 2; ++i) expect_same(a->inputs[i].tensor, b->inputs[i].tensor, a->inputs[i].name);
  EXPECT_EQ(b->inputs[0].tensor.get_i64(2), INT64_MAX);
  EXPECT_EQ(b->inputs[1].tensor.strings()[0], "ab");
  for (const char* bad : {R"({"inputs":[{"data":[1,"a"],"name":"x","datatype":"FP32","shape":[2]}]})",
                          R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,"a"]}]})"}) {
    auto r = decode_infer_request(bad, std::nullopt);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("element 1 is not a number"), std::string::npos) << r.status().message();
  }
}

TEST(CodecLimits, ElementCountErrorSpeaksOfElements) {
  // A shape larger than a small JSON body could hold: the error counts elements, not bytes.
  std::string body = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3,64,64],"data":[1,2,3]}]})";
  auto r = decode_infer_request(body, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "input 'x': shape [1,3,64,64] needs 12288 elements but 'data' has 3");
  std::string more = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2,3]}]})";
  r = decode_infer_request(more, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "input 'x': shape [2] needs 2 elements but 'data' has 3");
}

TEST(CodecLimits, DuplicateKeysAndObjectsInDataAreRefused) {
  for (auto [body, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"data":[2]}]})", "'data' twice"},
           {R"({"inputs":[{"name":"x","name":"y","datatype":"FP32","shape":[1],"data":[1]}]})", "'name' twice"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[{"a":1}]}]})", "holds an object"}}) {
    auto r = decode_infer_request(body, std::nullopt);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(CodecLimits, DeepResponsesAreErrorsToo) {
  std::string deep = R"({"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":)" + std::string(100000, '[') +
                     "1" + std::string(100000, ']') + "}]}";
  auto r = decode_infer_response(deep, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("levels deep"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gpuopt::server
