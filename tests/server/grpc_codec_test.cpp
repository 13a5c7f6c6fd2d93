// decode_grpc_request's zero-copy form: raw_input_contents become the input tensors' storage
// (the tensor's data pointer is the message's own buffer), survive the message, and decode to the
// same values as the copying form; BYTES and typed contents still decode; encode_grpc_response
// writes each output's bytes once into its entry; encode_grpc_response_buffer writes the same
// message with the output bytes as slices over the tensors themselves.
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "server/grpc_codec.h"

namespace gpuopt::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

// A request with one FP32 input [rows, n] = i * 0.5 - 7 as raw contents, and one BYTES input.
std::unique_ptr<ModelInferRequest> make_request(int64_t rows, int64_t n) {
  auto r = std::make_unique<ModelInferRequest>();
  r->set_model_name("m");
  auto* in = r->add_inputs();
  in->set_name("X");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(n);
  std::string raw(static_cast<size_t>(rows * n) * sizeof(float), '\0');
  for (int64_t i = 0; i < rows * n; ++i) {
    const float v = static_cast<float>(i) * 0.5f - 7.f;
    std::memcpy(raw.data() + i * 4, &v, 4);
  }
  r->add_raw_input_contents(std::move(raw));
  auto* s = r->add_inputs();
  s->set_name("S");
  s->set_datatype("BYTES");
  s->add_shape(2);
  std::string b;
  for (std::string_view e : {std::string_view("ab"), std::string_view("xyz")}) {
    const uint32_t len = static_cast<uint32_t>(e.size());
    b.append(reinterpret_cast<const char*>(&len), 4);
    b.append(e);
  }
  r->add_raw_input_contents(std::move(b));
  return r;
}

void expect_ramp(const Tensor& t, int64_t count) {
  ASSERT_EQ(t.dtype(), DType::F32);
  ASSERT_EQ(t.numel(), count);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(t.data<float>()[i], static_cast<float>(i) * 0.5f - 7.f) << "element " << i;
}

TEST(GrpcCodec, RawInputsAreViewedInPlaceNotCopied) {
  auto msg = make_request(2, 300000);  // 2.4 MB: a heap buffer of its own
  const char* bytes = msg->raw_input_contents(0).data();
  auto r = decode_grpc_request(msg.get(), DecodeLimits{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->inputs.size(), 2u);
  const Tensor& x = r->inputs[0].tensor;
  // The tensor's storage is the message's own buffer, moved out of it: no byte was copied.
  EXPECT_EQ(static_cast<const char*>(x.raw()), bytes);
  EXPECT_TRUE(msg->raw_input_contents(0).empty());
  EXPECT_EQ(x.shape(), (Shape{2, 300000}));
  EXPECT_EQ(r->memory_bytes, size_t{2} * 300000 * 4 + 2 * sizeof(std::string) + 4 + 2 + 4 + 3);
  // The bytes outlive the message (ASan would catch a view of freed memory).
  msg.reset();
  expect_ramp(x, 600000);
  const Tensor& s = r->inputs[1].tensor;
  ASSERT_EQ(s.dtype(), DType::String);
  EXPECT_EQ(s.strings()[0], "ab");
  EXPECT_EQ(s.strings()[1], "xyz");
}

TEST(GrpcCodec, ConstMessageIsCopiedWithTheSameValues) {
  const auto msg = make_request(3, 1000);
  const char* bytes = msg->raw_input_contents(0).data();
  auto r = decode_grpc_request(*msg, DecodeLimits{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NE(static_cast<const char*>(r->inputs[0].tensor.raw()), bytes);
  EXPECT_EQ(msg->raw_input_contents(0).size(), size_t{3} * 1000 * 4);  // the message is untouched
  expect_ramp(r->inputs[0].tensor, 3000);
}

TEST(GrpcCodec, TinyInputsDecodeEitherWay) {
  // 2 floats: 8 bytes, kept inside the std::string object (short string) wherever it is.
  auto msg = make_request(1, 2);
  auto r = decode_grpc_request(msg.get(), DecodeLimits{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_ramp(r->inputs[0].tensor, 2);
  msg.reset();
  expect_ramp(r->inputs[0].tensor, 2);
}

TEST(GrpcCodec, ChecksComeBeforeAnyEntryIsTaken) {
  auto msg = make_request(2, 100);
  msg->mutable_inputs(0)->set_shape(1, 101);  // 808 bytes needed, 800 given
  auto r = decode_grpc_request(msg.get(), DecodeLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("input 'X': shape [2,101] of FP32 needs 808 bytes"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(msg->raw_input_contents(0).size(), 800u);
}

TEST(GrpcCodec, InflightBudgetCountsTheMessageOnceNotTheViews) {
  auto msg = make_request(1, 1 << 20);  // 4 MiB
  DecodeLimits limits;
  // Room for the message and a little more, not for the message and a copy of its tensor.
  limits.inflight = std::make_shared<net::ByteBudget>(msg->ByteSizeLong() + (size_t{2} << 20));
  auto r = decode_grpc_request(msg.get(), limits);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->memory_hold);
  // The copying form needs the message and the copy: over the same budget it is refused.
  auto msg2 = make_request(1, 1 << 20);
  DecodeLimits tight = limits;
  tight.inflight = std::make_shared<net::ByteBudget>(msg2->ByteSizeLong() + (size_t{2} << 20));
  auto c = decode_grpc_request(*msg2, tight);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
}

TEST(GrpcCodec, OutputsAreWrittenOnceIntoTheirEntries) {
  InferReply reply;
  reply.meta.model_name = "m";
  Tensor y = Tensor::empty(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) y.data<float>()[i] = static_cast<float>(i) - 2.5f;
  reply.outputs.emplace_back("Y", y);
  ModelInferResponse out;
  encode_grpc_response(std::move(reply), &out);
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  ASSERT_EQ(out.raw_output_contents_size(), 1);
  const std::string& raw = out.raw_output_contents(0);
  ASSERT_EQ(raw.size(), 24u);
  EXPECT_EQ(std::memcmp(raw.data(), y.raw(), 24), 0);
}

std::string flatten(const grpc::ByteBuffer& b, std::vector<const void*>* starts = nullptr) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string all;
  for (const auto& s : slices) {
    if (starts) starts->push_back(s.begin());
    all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return all;
}

TEST(GrpcCodec, BufferEncodingIsTheSameMessageOverTheTensorsBytes) {
  InferReply reply;
  reply.meta = {"m", "3", "req-7"};
  // Large enough for a multi-byte length prefix (and for grpc to keep a slice by reference).
  Tensor y = Tensor::empty(DType::F32, {300, 257});
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = static_cast<float>(i % 1013) * 0.25f - 9.f;
  Tensor s = Tensor::empty(DType::String, {2});
  s.strings()[0] = "hello";
  s.strings()[1] = std::string("a\0b", 3);
  Tensor z = Tensor::empty(DType::I64, {1, 4});
  for (int i = 0; i < 4; ++i) z.data<int64_t>()[i] = -i;
  reply.outputs = {{"Y", y}, {"S", s}, {"Z", z}, {"W", Tensor::zeros(DType::F32, {2, 2})}};
  reply.shm = {std::nullopt, std::nullopt, std::nullopt, ShmRef{"region", 64, 16}};
  const void* y_bytes = y.raw();

  ModelInferResponse want;
  encode_grpc_response(InferReply(reply), &want);
  std::vector<const void*> starts;
  grpc::ByteBuffer buf = encode_grpc_response_buffer(InferReply(reply), false);
  reply = InferReply();
  y = Tensor();  // the buffer alone keeps Y's bytes alive now
  const std::string wire = flatten(buf, &starts);
  ModelInferResponse got;
  ASSERT_TRUE(got.ParseFromString(wire));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want)) << got.DebugString().substr(0, 2000);
  ASSERT_EQ(got.raw_output_contents_size(), 4);
  EXPECT_EQ(got.raw_output_contents(0).size(), 300u * 257u * 4u);
  EXPECT_EQ(got.raw_output_contents(3).size(), 0u);  // written to shared memory: an empty entry
  EXPECT_EQ(got.outputs(3).parameters().at("shared_memory_region").string_param(), "region");
  // Y's entry is a slice over the tensor's own memory, not a copy.
  EXPECT_NE(std::find(starts.begin(), starts.end(), y_bytes), starts.end());

  // The stream form wraps the same message as infer_response.
  InferReply again;
  again.meta = {"m", "3", "req-8"};
  again.outputs = {{"Z", z}};
  ModelInferResponse want2;
  encode_grpc_response(InferReply(again), &want2);
  inference::ModelStreamInferResponse streamed;
  ASSERT_TRUE(streamed.ParseFromString(flatten(encode_grpc_response_buffer(std::move(again), true))));
  EXPECT_TRUE(streamed.error_message().empty());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(streamed.infer_response(), want2));
  inference::ModelStreamInferResponse err;
  ASSERT_TRUE(err.ParseFromString(flatten(encode_stream_error("model 'x' is not ready"))));
  EXPECT_EQ(err.error_message(), "model 'x' is not ready");
  EXPECT_FALSE(err.has_infer_response());
}

}  // namespace
}  // namespace gpuopt::server
