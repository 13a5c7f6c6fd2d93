// The gRPC endpoint's asynchronous inference path in-process (so that the sanitizer jobs see it):
// 1,000 ModelInfer calls in flight at once over four connections, a stream, calls cancelled
// mid-call, an oversized message, and a shutdown with calls in flight. The recording add_sub
// backend computes OUTPUT0 = a + b, OUTPUT1 = a - b; every answer is checked against that sum
// computed here.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "fake_instance.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/inference_server.h"

// ThreadSanitizer: libgrpc, libgpr and Abseil are not instrumented, so their own synchronisation
// (absl::Mutex on futexes, the poller's epoll set made on one thread and waited on by another,
// strings handed to grpc's threads) is invisible and their calls into intercepted functions read
// as races. Those calls are not
// checked; the server's own code is (it orders what it shares with grpc's threads with mutexes
// of its own: grpc_async.cpp). Likewise grpc++'s inline code on either side of a completion
// queue: an operation started on one thread (FillOps, under the call's mutex) is finalized on
// the queue's thread inside Next, after grpc's own hand-over.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libabsl_base.so\n"
         "called_from_lib:libabsl_spinlock_wait.so\n"
         "called_from_lib:libabsl_raw_logging_internal.so\n"
         "called_from_lib:libabsl_malloc_internal.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_stacktrace.so\n"
         "called_from_lib:libabsl_symbolize.so\n"
         "called_from_lib:libabsl_time.so\n"
         "called_from_lib:libabsl_time_zone.so\n"
         "called_from_lib:libabsl_civil_time.so\n"
         "called_from_lib:libabsl_strings.so\n"
         "called_from_lib:libabsl_strings_internal.so\n"
         "called_from_lib:libabsl_str_format_internal.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "called_from_lib:libabsl_cordz_info.so\n"
         "called_from_lib:libabsl_cordz_handle.so\n"
         "called_from_lib:libabsl_cordz_functions.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_statusor.so\n"
         "called_from_lib:libabsl_raw_hash_set.so\n"
         "called_from_lib:libabsl_hashtablez_sampler.so\n"
         "called_from_lib:libabsl_hash.so\n"
         "called_from_lib:libabsl_city.so\n"
         "called_from_lib:libabsl_low_level_hash.so\n"
         "called_from_lib:libabsl_throw_delegate.so\n"
         "called_from_lib:libabsl_int128.so\n"
         "race:grpc::internal::CallOpSet<*>::FinalizeResult\n";
}

namespace gpuopt::server {
namespace {

namespace fs = std::filesystem;
namespace pb = inference;
using namespace std::chrono_literals;
using testing::Recorder;

struct GrpcFixture {
  fs::path dir;
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
  std::unique_ptr<InferenceServer> server;

  explicit GrpcFixture(size_t max_message = size_t{1} << 20) {
    dir = fs::temp_directory_path() / ("gpuopt_grpc_async_test_" + std::to_string(::getpid()) + "_" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(dir);
    fs::create_directories(dir / "simple/1");
    std::ofstream(dir / "simple/config.pbtxt")
        << "name: \"simple\"\nmax_batch_size: 16\ndynamic_batching { max_queue_delay_microseconds: 500 }\n"
           "instance_group { count: 2 kind: KIND_CPU }\n";
    std::ofstream(dir / "simple/1/model.onnx") << "fake";
    InferenceServerOptions o;
    o.repo.path = dir.string();
    auto r = rec;
    o.repo.loader = [r](const std::string&) -> Result<ModelSource> { return testing::add_sub_source(r); };
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.http.threads = 1;
    o.gpu_metrics = false;
    o.grpc = std::make_shared<GrpcOptions>();
    o.grpc->host = "127.0.0.1";
    o.grpc->port = 0;
    o.grpc->threads = 2;
    o.grpc->max_message_bytes = max_message;
    o.grpc->watchdog_interval = 0ms;
    auto s = InferenceServer::start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(s).value();
  }
  ~GrpcFixture() {
    if (server) {
      EXPECT_EQ(server->shutdown(10s), 0);  // every accepted request answered
    }
    server.reset();
    fs::remove_all(dir);
  }
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub(int channel_id = 0) const {
    grpc::ChannelArguments args;
    args.SetInt("gpuopt.test.channel", channel_id);  // a connection of its own per id
    args.SetMaxReceiveMessageSize(-1);
    return pb::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(server->grpc_port()), grpc::InsecureChannelCredentials(), args));
  }
};

std::vector<float> values(int seed, int n = 16) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(seed * 31 + i) * 0.25f - 7.0f;
  return v;
}

pb::ModelInferRequest request(int seed, const std::string& id = "") {
  pb::ModelInferRequest q;
  q.set_model_name("simple");
  q.set_id(id);
  for (int k = 0; k < 2; ++k) {
    auto* in = q.add_inputs();
    in->set_name(k == 0 ? "INPUT0" : "INPUT1");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(16);
    auto v = values(seed + k);
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  }
  return q;
}

// The answer equals a + b and a - b of the request made from `seed`.
::testing::AssertionResult answers(const pb::ModelInferResponse& r, int seed) {
  if (r.outputs_size() != 2 || r.raw_output_contents_size() != 2)
    return ::testing::AssertionFailure() << r.outputs_size() << " outputs, " << r.raw_output_contents_size() << " raw";
  auto a = values(seed), b = values(seed + 1);
  for (int k = 0; k < 2; ++k) {
    const std::string& raw = r.raw_output_contents(k);
    if (raw.size() != 16 * sizeof(float)) return ::testing::AssertionFailure() << "output " << k << ": " << raw.size();
    std::vector<float> got(16);
    std::memcpy(got.data(), raw.data(), raw.size());
    const bool sum = r.outputs(k).name() == "OUTPUT0";
    for (size_t i = 0; i < 16; ++i)
      if (got[i] != (sum ? a[i] + b[i] : a[i] - b[i]))
        return ::testing::AssertionFailure() << "seed " << seed << " " << r.outputs(k).name() << "[" << i << "] = " << got[i];
  }
  return ::testing::AssertionSuccess();
}

void close_gate(Recorder& r) {
  std::lock_guard<std::mutex> lk(r.mu);
  r.gate_open = false;
}

struct Pending {
  int seed = 0;
  grpc::ClientContext ctx;
  pb::ModelInferResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ModelInferResponse>> rpc;
};

// `n` calls started at once over `channels` connections; waits for every one.
std::vector<std::unique_ptr<Pending>> call_all(const GrpcFixture& f, int n, int channels,
                                               std::chrono::milliseconds deadline = 60s) {
  std::vector<std::unique_ptr<pb::GRPCInferenceService::Stub>> stubs;
  for (int c = 0; c < channels; ++c) stubs.push_back(f.stub(c));
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Pending>> calls;
  for (int i = 0; i < n; ++i) {
    auto p = std::make_unique<Pending>();
    p->seed = i;
    p->ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    p->rpc = stubs[static_cast<size_t>(i % channels)]->AsyncModelInfer(&p->ctx, request(i), &cq);
    p->rpc->Finish(&p->resp, &p->status, p.get());
    calls.push_back(std::move(p));
  }
  for (int i = 0; i < n; ++i) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
  }
  cq.Shutdown();
  return calls;
}

TEST(GrpcAsync, ThousandConcurrentCallsAnswerCorrectly) {
  GrpcFixture f;
  ASSERT_TRUE(f.server);
  auto calls = call_all(f, 1000, 4);
  int ok = 0;
  for (auto& p : calls) {
    ASSERT_TRUE(p->status.ok()) << p->seed << ": " << p->status.error_message();
    ASSERT_TRUE(answers(p->resp, p->seed));
    ok++;
  }
  EXPECT_EQ(ok, 1000);
}

TEST(GrpcAsync, StreamAnswersEveryRequestUnderItsId) {
  GrpcFixture f;
  ASSERT_TRUE(f.server);
  auto stub = f.stub();
  grpc::ClientContext ctx;
  auto stream = stub->ModelStreamInfer(&ctx);
  const int n = 300;
  auto reader = std::async(std::launch::async, [&] {
    std::map<int, pb::ModelInferResponse> got;
    pb::ModelStreamInferResponse r;
    while (stream->Read(&r)) {
      EXPECT_TRUE(r.error_message().empty()) << r.error_message();
      got[std::stoi(r.infer_response().id())] = r.infer_response();
    }
    return got;
  });
  for (int i = 0; i < n; ++i) ASSERT_TRUE(stream->Write(request(i, std::to_string(i))));
  stream->WritesDone();
  auto got = reader.get();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (auto& [i, r] : got) ASSERT_TRUE(answers(r, i));
}

TEST(GrpcAsync, CallsCancelledMidCallLeaveTheServerWhole) {
  GrpcFixture f;
  ASSERT_TRUE(f.server);
  close_gate(*f.rec);  // the calls wait in the batcher while their clients go
  {
    auto stub = f.stub();
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Pending>> calls;
    for (int i = 0; i < 100; ++i) {
      auto p = std::make_unique<Pending>();
      p->rpc = stub->AsyncModelInfer(&p->ctx, request(i), &cq);
      p->rpc->Finish(&p->resp, &p->status, p.get());
      calls.push_back(std::move(p));
    }
    ASSERT_TRUE(f.rec->wait_running(1));
    for (auto& p : calls) p->ctx.TryCancel();
    for (size_t i = 0; i < calls.size(); ++i) {
      void* tag = nullptr;
      bool ok = false;
      ASSERT_TRUE(cq.Next(&tag, &ok));
      auto* p = static_cast<Pending*>(tag);
      EXPECT_TRUE(p->status.ok() || p->status.error_code() == grpc::StatusCode::CANCELLED) << p->status.error_message();
    }
    // A stream whose client goes with requests in flight.
    grpc::ClientContext sctx;
    auto stream = stub->ModelStreamInfer(&sctx);
    for (int i = 0; i < 20; ++i) stream->Write(request(i, std::to_string(i)));
    sctx.TryCancel();
    cq.Shutdown();
  }
  f.rec->open_gate();
  auto calls = call_all(f, 20, 1);
  for (auto& p : calls) {
    ASSERT_TRUE(p->status.ok()) << p->status.error_message();
    EXPECT_TRUE(answers(p->resp, p->seed));
  }
}

TEST(GrpcAsync, OversizedMessageIsRefusedAndTheServerGoesOn) {
  GrpcFixture f(size_t{64} << 10);
  ASSERT_TRUE(f.server);
  auto stub = f.stub();
  pb::ModelInferRequest big = request(1);
  big.mutable_raw_input_contents(0)->assign(size_t{1} << 20, 'x');
  grpc::ClientContext ctx;
  pb::ModelInferResponse resp;
  grpc::Status s = stub->ModelInfer(&ctx, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  // Within the limit but not a tensor of the declared shape: refused by the decoder.
  pb::ModelInferRequest wrong = request(2);
  wrong.mutable_raw_input_contents(1)->resize(17);
  grpc::ClientContext ctx2;
  s = stub->ModelInfer(&ctx2, wrong, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  grpc::ClientContext ctx3;
  s = stub->ModelInfer(&ctx3, request(3), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(answers(resp, 3));
}

TEST(GrpcAsync, ShutdownWithCallsInFlightAnswersThemAndDoesNotHang) {
  GrpcFixture f;
  ASSERT_TRUE(f.server);
  close_gate(*f.rec);  // every batch waits until the shutdown began
  auto calls = std::async(std::launch::async, [&] { return call_all(f, 200, 2, 30s); });
  ASSERT_TRUE(f.rec->wait_running(1));
  auto stopper = std::async(std::launch::async, [&] { return f.server->shutdown(20s); });
  std::this_thread::sleep_for(50ms);
  f.rec->open_gate();
  ASSERT_EQ(stopper.wait_for(25s), std::future_status::ready) << "shutdown hung";
  EXPECT_EQ(stopper.get(), 0);
  int answered = 0;
  for (auto& p : calls.get()) {
    if (p->status.ok()) {
      EXPECT_TRUE(answers(p->resp, p->seed));
      answered++;
    } else {  // arrived after the drain began: refused by the server (UNAVAILABLE), or cancelled
              // by grpc++'s Shutdown when it reached the server as the listener closed
      EXPECT_TRUE(p->status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                  p->status.error_code() == grpc::StatusCode::CANCELLED)
          << p->status.error_code() << " " << p->status.error_message();
    }
  }
  EXPECT_GT(answered, 0);
}

}  // namespace
}  // namespace gpuopt::server
