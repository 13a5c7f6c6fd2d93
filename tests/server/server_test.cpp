// InferenceServer in-process on 127.0.0.1 with a recording add_sub backend: every endpoint,
// JSON and binary tensors, error codes, stats, explicit load/unload, metrics, graceful shutdown.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>

#include "fake_instance.h"
#include "server/inference_server.h"
#include "server/kserve.h"

namespace gpuopt::server {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::Recorder;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

struct ServerFixture {
  fs::path dir;
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
  std::unique_ptr<InferenceServer> server;
  std::unique_ptr<net::HttpClient> client;

  explicit ServerFixture(ControlMode mode = ControlMode::kNone, std::vector<std::string> load = {},
                         size_t max_body = size_t{64} << 20, std::string trace_file = "") {
    dir = fs::temp_directory_path() / ("gpuopt_server_test_" + std::to_string(::getpid()) + "_" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(dir);
    write(dir / "simple/config.pbtxt", R"(
name: "simple"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 2000 }
instance_group { count: 2 kind: KIND_CPU }
model_warmup { name: "zeros" batch_size: 2
  inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [16] zero_data: true } }
  inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [16] zero_data: true } } }
)");
    write(dir / "simple/1/model.onnx", "fake");
    write(dir / "nobatch/1/model.onnx", "fake");
    write(dir / "nobatch/2/model.onnx", "fake");
    InferenceServerOptions o;
    o.repo.path = dir.string();
    auto rec_copy = rec;
    o.repo.loader = [rec_copy](const std::string& path) -> Result<ModelSource> {
      if (path.find("nobatch") != std::string::npos) return testing::add_sub_source(rec_copy, {2, 4});
      return testing::add_sub_source(rec_copy);
    };
    o.control_mode = mode;
    o.load_models = std::move(load);
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.http.threads = 2;
    o.http.max_body_bytes = max_body;
    o.metrics_port = 0;
    o.metrics_host = "127.0.0.1";
    o.gpu_metrics = false;
    o.trace_file = std::move(trace_file);
    o.trace_rate = 1;
    auto s = InferenceServer::start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(s).value();
    client = std::make_unique<net::HttpClient>("127.0.0.1", server ? server->http_port() : 1);
  }
  ~ServerFixture() {
    client.reset();
    server.reset();
    fs::remove_all(dir);
  }
};

std::string infer_body(int seed, int64_t rows = 1, int64_t len = 16, bool binary = false, size_t* hlen = nullptr,
                       const char* dtype = "FP32") {
  Tensor a = Tensor::empty(DType::F32, {rows, len}), b = Tensor::empty(DType::F32, {rows, len});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.data<float>()[i] = static_cast<float>(seed + i);
    b.data<float>()[i] = 0.5f;
  }
  size_t h = 0;
  std::string body =
      encode_infer_request({{"INPUT0", a}, {"INPUT1", b}}, binary, binary, "id-" + std::to_string(seed), &h);
  if (hlen) *hlen = h;
  if (std::string(dtype) != "FP32") {
    size_t p = body.find("\"FP32\"");
    body.replace(p, 6, std::string("\"") + dtype + "\"");
  }
  return body;
}

void expect_outputs(const std::string& body, std::optional<size_t> hlen, int seed, int64_t rows = 1, int64_t len = 16) {
  auto out = decode_infer_response(body, hlen);
  ASSERT_TRUE(out.ok()) << out.status().to_string() << " body: " << body.substr(0, 300);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].first, "OUTPUT0");
  const Tensor& s = (*out)[0].second;
  ASSERT_EQ(s.shape(), (Shape{rows, len}));
  for (int64_t i = 0; i < s.numel(); ++i) {
    ASSERT_EQ(s.get_f64(i), seed + i + 0.5);
    ASSERT_EQ((*out)[1].second.get_f64(i), seed + i - 0.5);
  }
}

// GPU instances with no model_warmup run the largest batch once on zeros before the model is
// ready (device buffers preallocated); CPU instances and configured warm-ups are left as they are.
TEST(Server, GpuInstancesWarmUpAtTheLargestBatch) {
  fs::path dir = fs::temp_directory_path() / ("gpuopt_warm_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write(dir / "gpu/config.pbtxt", "max_batch_size: 8\ninstance_group { count: 2 kind: KIND_GPU }\n");
  write(dir / "gpu/1/model.onnx", "fake");
  write(dir / "cpu/config.pbtxt", "max_batch_size: 8\ninstance_group { count: 2 kind: KIND_CPU }\n");
  write(dir / "cpu/1/model.onnx", "fake");
  auto gpu_rec = std::make_shared<Recorder>(), cpu_rec = std::make_shared<Recorder>();
  InferenceServerOptions o;
  o.repo.path = dir.string();
  o.repo.cuda_devices = 1;  // the fake backend stands in for the GPU session
  o.repo.loader = [gpu_rec, cpu_rec](const std::string& path) -> Result<ModelSource> {
    return testing::add_sub_source(path.find("gpu") != std::string::npos ? gpu_rec : cpu_rec);
  };
  o.http.host = "127.0.0.1";
  o.http.port = 0;
  o.http.threads = 1;
  o.metrics_port = 0;
  o.metrics_host = "127.0.0.1";
  o.gpu_metrics = false;
  auto s = InferenceServer::start(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(gpu_rec->batch_rows, (std::vector<int64_t>{8, 8}));
  ASSERT_EQ(gpu_rec->shapes.size(), 2u);
  EXPECT_EQ(gpu_rec->shapes[0], (Shape{8, 16}));
  EXPECT_EQ(gpu_rec->first_values, (std::vector<float>{0.f, 0.f}));
  EXPECT_TRUE(cpu_rec->batch_rows.empty());
  s->reset();
  fs::remove_all(dir);
}

// The engine's kernel settings reach each instance: the server's (serve --kernel) for every model,
// a model's gpuopt.kernel.* parameters over them for its own instances.
TEST(Server, KernelSettingsReachTheInstances) {
  fs::path dir = fs::temp_directory_path() / ("gpuopt_kernels_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write(dir / "own/config.pbtxt", "max_batch_size: 8\ninstance_group { count: 1 kind: KIND_CPU }\n"
                                  "parameters { key: \"gpuopt.kernel.GPUOPT_FA_WARPS\" value: { string_value: \"4\" } }\n"
                                  "parameters { key: \"gpuopt.kernel.GPUOPT_DISABLE_FUSION\" value: { string_value: \"gelu\" } }\n");
  write(dir / "own/1/model.onnx", "fake");
  write(dir / "plain/config.pbtxt", "max_batch_size: 8\ninstance_group { count: 1 kind: KIND_CPU }\n");
  write(dir / "plain/1/model.onnx", "fake");
  auto rec = std::make_shared<Recorder>();
  auto seen = std::make_shared<std::map<std::string, std::optional<KernelSettings>>>();
  auto mu = std::make_shared<std::mutex>();
  InferenceServerOptions o;
  o.repo.path = dir.string();
  KernelSettings server_side;
  ASSERT_TRUE(server_side.set("GPUOPT_DISABLE_FUSION", "all").ok());
  ASSERT_TRUE(server_side.set("GPUOPT_MATMUL_AUTOTUNE", "0").ok());
  o.repo.kernels = server_side;
  o.repo.loader = [rec, seen, mu](const std::string& path) -> Result<ModelSource> {
    ModelSource src = testing::add_sub_source(rec);
    const std::string model = path.find("own") != std::string::npos ? "own" : "plain";
    src.create = [inner = src.create, seen, mu, model](const InstanceSpec& spec) {
      std::lock_guard<std::mutex> lk(*mu);
      (*seen)[model] = spec.kernels;
      return inner(spec);
    };
    return src;
  };
  o.http.host = "127.0.0.1";
  o.http.port = 0;
  o.http.threads = 1;
  o.metrics_port = 0;
  o.metrics_host = "127.0.0.1";
  o.gpu_metrics = false;
  auto s = InferenceServer::start(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(seen->count("plain") && (*seen)["plain"].has_value());
  EXPECT_EQ(*(*seen)["plain"], server_side);
  ASSERT_TRUE(seen->count("own") && (*seen)["own"].has_value());
  const KernelSettings& own = *(*seen)["own"];
  EXPECT_EQ(own.disable_fusion, "gelu");  // the model's over the server's
  EXPECT_EQ(own.fa_warps, 4);
  EXPECT_FALSE(own.matmul_autotune);  // the server's where the model says nothing
  s->reset();
  fs::remove_all(dir);
}

TEST(Server, HealthMetadataConfig) {
  ServerFixture f;
  ASSERT_TRUE(f.server);
  auto& c = *f.client;
  EXPECT_EQ(c.get("/v2/health/live")->status, 200);
  EXPECT_EQ(c.get("/v2/health/ready")->status, 200);
  auto meta = json::parse(c.get("/v2")->body);
  EXPECT_EQ(meta["name"], "gpuopt");
  auto m = c.get("/v2/models/simple");
  ASSERT_EQ(m->status, 200) << m->body;
  auto mj = json::parse(m->body);
  EXPECT_EQ(mj["inputs"][0]["shape"], json::parse("[-1,16]"));
  EXPECT_EQ(mj["inputs"][0]["datatype"], "FP32");
  EXPECT_EQ(mj["versions"], json::parse("[\"1\"]"));
  EXPECT_EQ(c.get("/v2/models/simple/versions/1")->status, 200);
  EXPECT_EQ(c.get("/v2/models/simple/ready")->status, 200);
  EXPECT_EQ(c.get("/v2/models/simple/versions/7/ready")->status, 404);
  EXPECT_EQ(c.get("/v2/models/nope/ready")->status, 404);
  auto cfg = json::parse(c.get("/v2/models/simple/config")->body);
  EXPECT_EQ(cfg["max_batch_size"], 8);
  EXPECT_EQ(cfg["dynamic_batching"]["max_queue_delay_microseconds"], 2000);
  EXPECT_EQ(cfg["instance_group"][0]["count"], 2);
  auto nb = json::parse(c.get("/v2/models/nobatch/config")->body);
  EXPECT_EQ(nb["max_batch_size"], 0);  // fixed dims: derived config without batching
  EXPECT_EQ(nb["input"][0]["dims"], json::parse("[2,4]"));
  auto nbm = json::parse(c.get("/v2/models/nobatch")->body);
  EXPECT_EQ(nbm["versions"], json::parse("[\"2\"]"));  // latest only by default
  // Warm-up ran on both instances before ready: 2 executions of batch 2.
  EXPECT_EQ(std::count(f.rec->batch_rows.begin(), f.rec->batch_rows.end(), 2), 2);
}

TEST(Server, InferJsonAndBinary) {
  ServerFixture f;
  ASSERT_TRUE(f.server);
  auto r = f.client->post("/v2/models/simple/infer", infer_body(10, 3));
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["model_name"], "simple");
  EXPECT_EQ(j["model_version"], "1");
  EXPECT_EQ(j["id"], "id-10");
  expect_outputs(r->body, std::nullopt, 10, 3);
  size_t hlen = 0;
  std::string body = infer_body(20, 2, 16, true, &hlen);
  auto b = f.client->post("/v2/models/simple/versions/1/infer", body,
                          {{"Inference-Header-Content-Length", std::to_string(hlen)}}, "application/octet-stream");
  ASSERT_EQ(b->status, 200) << b->body;
  auto h = b->header("Inference-Header-Content-Length");
  ASSERT_FALSE(h.empty());
  expect_outputs(b->body, std::stoul(std::string(h)), 20, 2);
  // Selecting one output, as binary, while the default is JSON.
  std::string sel = infer_body(30);
  sel.insert(sel.size() - 1, R"(,"outputs":[{"name":"OUTPUT1","parameters":{"binary_data":true}}])");
  auto s = f.client->post("/v2/models/simple/infer", sel);
  ASSERT_EQ(s->status, 200) << s->body;
  auto out = decode_infer_response(s->body, std::stoul(std::string(s->header("Inference-Header-Content-Length"))));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].first, "OUTPUT1");
  EXPECT_EQ((*out)[0].second.get_f64(0), 29.5);
  // Non-batching model takes its fixed shape.
  auto nb = f.client->post("/v2/models/nobatch/infer", infer_body(1, 2, 4));
  ASSERT_EQ(nb->status, 200) << nb->body;
  expect_outputs(nb->body, std::nullopt, 1, 2, 4);
}

TEST(Server, ErrorCodes) {
  ServerFixture f(ControlMode::kNone, {}, 4096);
  ASSERT_TRUE(f.server);
  auto& c = *f.client;
  auto check = [&](const std::string& target, const std::string& body, int code, const char* want) {
    auto r = c.post(target, body);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, code) << target << " " << r->body;
    auto j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
    EXPECT_NE(j["error"].get<std::string>().find(want), std::string::npos) << r->body;
  };
  check("/v2/models/nope/infer", infer_body(1), 404, "unknown model 'nope'");
  check("/v2/models/simple/versions/9/infer", infer_body(1), 404, "no ready version '9'");
  check("/v2/models/simple/infer", "{not json", 400, "not valid JSON");
  check("/v2/models/simple/infer", infer_body(1, 1, 15), 400, "shape [1,15] does not match the model's [-1,16]");
  check("/v2/models/simple/infer", infer_body(1, 9), 400, "batch size 9 is outside 1..8");
  check("/v2/models/simple/infer", infer_body(1, 1, 16, false, nullptr, "FP64"), 400, "datatype FP64");
  check("/v2/models/simple/infer", R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]})", 400,
        "shape [1,1]");
  check(
      "/v2/models/simple/infer",
      R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]})",
      400, "expected input 'INPUT1'");
  std::string extra = infer_body(1);
  extra.insert(extra.size() - 1, R"(,"outputs":[{"name":"BOGUS"}])");
  check("/v2/models/simple/infer", extra, 400, "unexpected inference output 'BOGUS'");
  check("/v2/models/simple/infer", std::string(5000, ' '), 413, "limit of 4096 bytes");
  auto bad_len = c.post("/v2/models/simple/infer", infer_body(1), {{"Inference-Header-Content-Length", "abc"}});
  EXPECT_EQ(bad_len->status, 400);
  // None of it disturbed the server.
  auto ok = c.post("/v2/models/simple/infer", infer_body(5));
  EXPECT_EQ(ok->status, 200);
  auto load = c.post("/v2/repository/models/simple/load", "");
  EXPECT_EQ(load->status, 400);  // control mode none
  auto stats = json::parse(c.get("/v2/models/simple/stats")->body);
  EXPECT_GE(stats["model_stats"][0]["inference_stats"]["fail"]["count"].get<int>(), 7);
}

TEST(Server, StatsAndMetricsCountBatches) {
  ServerFixture f;
  ASSERT_TRUE(f.server);
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> ts;
  std::atomic<int> good{0};
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      net::HttpClient c("127.0.0.1", f.server->http_port());
      for (int i = 0; i < kEach; ++i) {
        int seed = t * 1000 + i;
        auto r = c.post("/v2/models/simple/infer", infer_body(seed));
        if (r.ok() && r->status == 200) {
          auto out = decode_infer_response(r->body, std::nullopt);
          if (out.ok() && (*out)[0].second.get_f64(5) == seed + 5.5) good++;
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(good.load(), kThreads * kEach);
  auto all = json::parse(f.client->get("/v2/models/stats")->body);
  json s;
  for (auto& m : all["model_stats"])
    if (m["name"] == "simple") s = m;
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s["version"], "1");
  EXPECT_EQ(s["inference_stats"]["success"]["count"], kThreads * kEach);
  // Warm-up runs before the batcher starts and is not counted (as in Triton).
  EXPECT_EQ(s["inference_count"], kThreads * kEach);
  EXPECT_LT(s["execution_count"].get<int>(), kThreads * kEach + 2);  // some requests shared a batch
  int64_t batched = 0;
  for (auto& b : s["batch_stats"])
    if (b["batch_size"].get<int>() > 1) batched += b["compute_infer"]["count"].get<int64_t>();
  EXPECT_GT(batched, 0);
  net::HttpClient m("127.0.0.1", f.server->metrics_port());
  auto text = m.get("/metrics");
  ASSERT_EQ(text->status, 200);
  EXPECT_NE(text->body.find(
                fmt::format("nv_inference_request_success{{model=\"simple\",version=\"1\"}} {}", kThreads * kEach)),
            std::string::npos)
      << text->body.substr(0, 2000);
  EXPECT_NE(text->body.find("nv_inference_request_failure{model=\"simple\",version=\"1\",reason=\"REJECTED\"} 0"),
            std::string::npos);
  EXPECT_NE(text->body.find("gpuopt_inference_batch_size_bucket{model=\"simple\",version=\"1\",le=\"+Inf\"}"),
            std::string::npos);
  EXPECT_NE(text->body.find("nv_inference_pending_request_count{model=\"simple\",version=\"1\"} 0"), std::string::npos);
}

TEST(Server, ExplicitLoadUnloadIndex) {
  ServerFixture f(ControlMode::kExplicit, {"nobatch"});
  ASSERT_TRUE(f.server);
  auto& c = *f.client;
  EXPECT_EQ(c.post("/v2/models/simple/infer", infer_body(1))->status, 404);
  auto idx = json::parse(c.post("/v2/repository/index", "{}")->body);
  ASSERT_EQ(idx.size(), 2u);
  auto ready_idx = json::parse(c.post("/v2/repository/index", "{\"ready\":true}")->body);
  ASSERT_EQ(ready_idx.size(), 1u);
  EXPECT_EQ(ready_idx[0]["name"], "nobatch");
  EXPECT_EQ(ready_idx[0]["state"], "READY");
  auto load = c.post("/v2/repository/models/simple/load", "");
  ASSERT_EQ(load->status, 200) << load->body;
  EXPECT_EQ(c.post("/v2/models/simple/infer", infer_body(1))->status, 200);
  EXPECT_EQ(c.post("/v2/repository/models/missing/load", "")->status, 400);
  EXPECT_EQ(c.post("/v2/repository/models/simple/unload", "")->status, 200);
  auto after = c.post("/v2/models/simple/infer", infer_body(1));
  EXPECT_EQ(after->status, 503);
  EXPECT_NE(after->body.find("not ready"), std::string::npos);
  auto idx2 = json::parse(c.post("/v2/repository/index", "")->body);
  for (auto& e : idx2)
    if (e["name"] == "simple") { EXPECT_EQ(e["state"], "UNAVAILABLE"); }
}

TEST(Server, GracefulShutdownFinishesInFlightAndRefusesNewWork) {
  ServerFixture f;
  ASSERT_TRUE(f.server);
  uint16_t port = f.server->http_port();
  f.rec->gate_open = false;
  size_t before = f.rec->batch_rows.size();
  auto in_flight = std::async(std::launch::async, [port] {
    net::HttpClient c("127.0.0.1", port);
    return c.post("/v2/models/simple/infer", infer_body(42));
  });
  ASSERT_TRUE(f.rec->wait_running(static_cast<int>(before) + 1));
  auto stopper = std::async(std::launch::async, [&] { return f.server->shutdown(10s); });
  std::this_thread::sleep_for(50ms);
  net::HttpClient c2("127.0.0.1", port);
  auto refused = c2.post("/v2/models/simple/infer", infer_body(1));
  ASSERT_TRUE(refused.ok()) << refused.status().to_string();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(c2.get("/v2/health/ready")->status, 503);
  EXPECT_EQ(c2.get("/v2/health/live")->status, 200);  // live while draining
  f.rec->open_gate();
  auto r = in_flight.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  expect_outputs(r->body, std::nullopt, 42);
  EXPECT_EQ(stopper.get(), 0);  // nothing left unanswered
}

}  // namespace
}  // namespace gpuopt::server

namespace gpuopt::server {
namespace {

// --trace-file with every request traced: an HTTP request's stages run in order from its first
// byte read (network in) to its last byte written (network out), none negative, and on one
// keep-alive connection a request's answer is out before the next request is read.
TEST(Server, TraceHasTheNetworkStagesOfHttpRequests) {
  const fs::path trace = fs::temp_directory_path() / ("gpuopt_server_trace_" + std::to_string(::getpid()) + ".json");
  {
    ServerFixture f(ControlMode::kNone, {}, size_t{64} << 20, trace.string());
    ASSERT_TRUE(f.server);
    for (int i = 0; i < 3; ++i) {
      auto r = f.client->post("/v2/models/simple/infer", infer_body(i));
      ASSERT_EQ(r->status, 200) << r->body;
    }
  }  // the server stops: the trace file is closed
  std::ifstream in(trace);
  const json events = json::parse(in, nullptr, /*allow_exceptions=*/false);
  fs::remove(trace);
  ASSERT_TRUE(events.is_array());
  std::map<int64_t, std::map<std::string, std::pair<double, double>>> req;  // request -> stage -> [start, end]
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
    req[e["args"]["request"].get<int64_t>()][e["cat"].get<std::string>()] = {e["ts"], e["ts"].get<double>() + e["dur"].get<double>()};
  }
  ASSERT_EQ(req.size(), 3u);
  const std::vector<std::string> order = {"network in", "decode", "queue", "compute input", "compute infer",
                                          "compute output", "encode", "network out"};
  const std::pair<double, double>* last_out = nullptr;
  for (auto& [id, stages] : req) {
    ASSERT_EQ(stages.size(), order.size()) << id;
    for (size_t k = 0; k + 1 < order.size(); ++k)
      EXPECT_LE(stages.at(order[k]).first, stages.at(order[k + 1]).first) << id << " " << order[k];
    EXPECT_NEAR(stages.at("network in").second, stages.at("decode").first, 1e-3);   // the handler starts decode
    EXPECT_NEAR(stages.at("encode").second, stages.at("network out").first, 1e-3);  // the answer handed over
    if (last_out) {  // one keep-alive connection: read only after the last answer was written
      EXPECT_LE(last_out->second, stages.at("network in").first + 1e-3) << id;
    }
    last_out = &stages.at("network out");
  }
}

}  // namespace
}  // namespace gpuopt::server
