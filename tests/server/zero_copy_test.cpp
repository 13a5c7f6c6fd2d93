// The lone large request's path copies nothing between the socket and the engine: the HTTP body
// is read straight into memory laid out by infer_body_buffer (request_body.h), decoding views
// the binary tensors where they are, and a batch of one request hands that view to the instance.
// The instance here records what it was given: the input's storage must be the whole request
// body (not a tensor-sized copy) and its data the bytes right after the JSON header.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "server/inference_server.h"
#include "server/kserve.h"
#include "server/request_body.h"

namespace gpuopt::server {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCols = 65536;  // 256 KiB per row: above the HTTP layer's 64 KiB for direct reads

struct Seen {
  std::mutex mu;
  const void* data = nullptr;          // the input's first byte
  const void* storage_data = nullptr;  // the start of the memory it lives in
  size_t storage_bytes = 0;
  int64_t rows = 0;
};

// Y[r] = sum of row r of X; records where X was.
class RowSum : public ModelInstance {
 public:
  explicit RowSum(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    {
      std::lock_guard<std::mutex> lk(seen_->mu);
      seen_->data = x.raw();
      seen_->storage_data = x.storage() ? x.storage()->data : nullptr;
      seen_->storage_bytes = x.storage() ? x.storage()->bytes : 0;
      seen_->rows = x.dim(0);
    }
    Tensor y = Tensor::empty(DType::F32, {x.dim(0), 1});
    for (int64_t r = 0; r < x.dim(0); ++r) {
      double s = 0;
      for (int64_t c = 0; c < kCols; ++c) s += x.data<float>()[r * kCols + c];
      y.data<float>()[r] = static_cast<float>(s);
    }
    return std::vector<Tensor>{y};
  }

 private:
  std::shared_ptr<Seen> seen_;
};

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("gpuopt_zero_copy_" + std::to_string(::getpid()));
  std::shared_ptr<Seen> seen = std::make_shared<Seen>();
  std::unique_ptr<InferenceServer> server;

  Fixture() {
    fs::remove_all(dir);
    fs::create_directories(dir / "lone/1");
    std::ofstream(dir / "lone/config.pbtxt") << "max_batch_size: 8\ndynamic_batching { }\n"
                                                "instance_group { count: 1 kind: KIND_CPU }\n";
    std::ofstream(dir / "lone/1/model.onnx") << "fake";
    InferenceServerOptions o;
    o.repo.path = dir.string();
    auto s = seen;
    o.repo.loader = [s](const std::string&) -> Result<ModelSource> {
      ModelSource src;
      src.inputs = {{"X", DType::F32, {-1, kCols}, true}};
      src.outputs = {{"Y", DType::F32, {-1, 1}, true}};
      src.create = [s](const InstanceSpec&) -> Result<std::unique_ptr<ModelInstance>> {
        return std::unique_ptr<ModelInstance>(std::make_unique<RowSum>(s));
      };
      return src;
    };
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.http.threads = 2;
    o.gpu_metrics = false;
    auto r = InferenceServer::start(std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) server = std::move(r).value();
  }
  ~Fixture() {
    server.reset();
    fs::remove_all(dir);
  }
};

Tensor rows_of(int64_t rows) {
  Tensor x = Tensor::empty(DType::F32, {rows, kCols});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i % 97) * 0.25);
  return x;
}

TEST(ZeroCopy, ALoneBinaryRequestReachesTheInstanceInTheBodyItWasReadInto) {
  Fixture f;
  ASSERT_TRUE(f.server);
  net::HttpClient client("127.0.0.1", f.server->http_port());
  for (int64_t rows : {1, 3, 8}) {
    Tensor x = rows_of(rows);
    size_t hlen = 0;
    const std::string body = encode_infer_request({{"X", x}}, true, true, "zc", &hlen);
    auto r = client.post("/v2/models/lone/infer", body, {{"Inference-Header-Content-Length", std::to_string(hlen)}},
                         "application/octet-stream");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->status, 200) << r->body;
    auto out = decode_infer_response(r->body, std::stoul(std::string(r->header("Inference-Header-Content-Length"))));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].second;
    ASSERT_EQ(y.shape(), (Shape{rows, 1}));
    for (int64_t row = 0; row < rows; ++row) {  // the oracle: the same sum over the tensor sent
      double s = 0;
      for (int64_t c = 0; c < kCols; ++c) s += x.data<float>()[row * kCols + c];
      EXPECT_EQ(y.data<float>()[row], static_cast<float>(s));
    }
    std::lock_guard<std::mutex> lk(f.seen->mu);
    EXPECT_EQ(f.seen->rows, rows);
    // The memory the input lives in is the whole request body (header and tensor), and the input
    // starts right after the header, 64-byte aligned: nothing was copied or moved on the way.
    EXPECT_EQ(f.seen->storage_bytes, body.size());
    EXPECT_EQ(f.seen->data, static_cast<const char*>(f.seen->storage_data) + hlen);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.seen->data) % 64, 0u);
  }
}

TEST(ZeroCopy, TheBodyBufferIsOnlyForBinaryInferRequests) {
  net::HttpRequest head;
  head.method = "POST";
  head.path = "/v2/models/m/versions/2/infer";
  EXPECT_EQ(infer_body_buffer(head, 1 << 20).data, nullptr);  // JSON only: no header length
  head.headers = {{"Inference-Header-Content-Length", "100"}};
  for (size_t hlen : {0, 1, 63, 64, 100, 1000}) {
    head.headers[0].second = std::to_string(hlen);
    net::BodyBuffer b = infer_body_buffer(head, 1 << 20);
    ASSERT_NE(b.data, nullptr);
    EXPECT_EQ(b.size, size_t{1} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data + hlen) % 64, 0u) << hlen;
    b.data[b.size - 1] = 1;  // the whole body is writable
  }
  head.headers[0].second = "2000000";  // longer than the body: the decoder reports it
  EXPECT_EQ(infer_body_buffer(head, 1 << 20).data, nullptr);
  head.headers[0].second = "12x";
  EXPECT_EQ(infer_body_buffer(head, 1 << 20).data, nullptr);
  head.headers[0].second = "100";
  head.path = "/v2/repository/index";
  EXPECT_EQ(infer_body_buffer(head, 1 << 20).data, nullptr);
  head.path = "/v2/models/m/infer";
  head.method = "PUT";
  EXPECT_EQ(infer_body_buffer(head, 1 << 20).data, nullptr);
}

// A pool whose blocks come from aligned_alloc, counting allocations and frees.
struct CountingPool {
  int allocs = 0, frees = 0;
  std::shared_ptr<BodyPool> pool;
  explicit CountingPool(size_t capacity) {
    pool = std::make_shared<BodyPool>(
        [this](size_t n) {
          ++allocs;
          return std::aligned_alloc(64, n);
        },
        [this](void* p) {
          ++frees;
          std::free(p);
        },
        capacity);
  }
};

TEST(ZeroCopy, BodyPoolReusesBlocksAndNeverAllocatesBeyondItsCapacity) {
  CountingPool c(size_t{3} << 20);
  void* first = nullptr;
  {
    std::shared_ptr<void> a = c.pool->take(100000);  // class 1 MiB
    first = a.get();
    std::memset(a.get(), 1, size_t{1} << 20);  // the whole class is usable
  }
  EXPECT_EQ(c.pool->free_bytes(), size_t{1} << 20);
  {
    std::shared_ptr<void> b = c.pool->take(size_t{1} << 20);  // same class: the same block again
    EXPECT_EQ(b.get(), first);
    std::shared_ptr<void> d = c.pool->take((size_t{1} << 20) + 1);  // 2 MiB class: a new block (3 MiB in all)
    ASSERT_NE(d.get(), nullptr);
    EXPECT_NE(d.get(), first);
    EXPECT_EQ(c.pool->take(10), nullptr);  // a third block would pass the capacity: ordinary memory
    EXPECT_EQ(c.pool->take(size_t{3} << 20), nullptr);  // a 4 MiB class can never fit
    EXPECT_EQ(c.allocs, 2);
    const BodyPool::Stats s = c.pool->stats();
    EXPECT_EQ(s.allocated, size_t{3} << 20);
    EXPECT_EQ(s.in_use, size_t{3} << 20);
    EXPECT_EQ(s.fallbacks, 2u);
  }
  // Released: both kept (nothing is freed on the request path).
  EXPECT_EQ(c.pool->free_bytes(), size_t{3} << 20);
  EXPECT_EQ(c.pool->stats().in_use, 0u);
  EXPECT_EQ(c.frees, 0);
  {
    std::shared_ptr<void> a = c.pool->take(10);  // the 1 MiB block
    EXPECT_EQ(a.get(), first);
    std::shared_ptr<void> b = c.pool->take(10);  // no 1 MiB block free, no room: the free 2 MiB one
    ASSERT_NE(b.get(), nullptr);
    EXPECT_EQ(c.allocs, 2);
  }
  c.pool.reset();
  EXPECT_EQ(c.frees, 2);  // the pool frees what it kept
}

TEST(ZeroCopy, BodyPoolGivesFreeBlocksBackToMakeRoomForAnotherSize) {
  CountingPool c(size_t{4} << 20);
  {
    auto a = c.pool->take(10);                      // 1 MiB
    auto b = c.pool->take(size_t{3} << 19);         // 2 MiB (1.5 MiB asked)
  }
  EXPECT_EQ(c.allocs, 2);
  {
    auto big = c.pool->take(size_t{5} << 19);  // 4 MiB class (2.5 MiB asked): both free blocks go back first
    ASSERT_NE(big.get(), nullptr);
    EXPECT_EQ(c.frees, 2);
    EXPECT_EQ(c.allocs, 3);
    EXPECT_EQ(c.pool->stats().allocated, size_t{4} << 20);
    EXPECT_EQ(c.pool->take(10), nullptr);  // everything is in use
  }
  const BodyPool::Stats s = c.pool->stats();
  EXPECT_EQ(s.frees, 2u);
  EXPECT_EQ(s.allocs, 3u);
  EXPECT_EQ(s.fallbacks, 1u);
}

TEST(ZeroCopy, PooledBodyBuffersKeepTheLayout) {
  auto hook = infer_body_buffers(/*pinned=*/false);  // no GPU here: the malloc form
  net::HttpRequest head;
  head.method = "POST";
  head.path = "/v2/models/m/infer";
  head.headers = {{"Inference-Header-Content-Length", "77"}};
  net::BodyBuffer b = hook(head, 5 << 20);
  ASSERT_NE(b.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data + 77) % 64, 0u);
  head.path = "/v2/models/m/ready";
  EXPECT_EQ(hook(head, 5 << 20).data, nullptr);
}

}  // namespace
}  // namespace gpuopt::server
