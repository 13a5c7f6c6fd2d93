// Peak memory of one large request through the real server on loopback (issue 14's goal: at most
// 3x the body for JSON tensors, 1.2x for binary ones). This binary replaces malloc and friends
// with counting wrappers over glibc's (its own binary, so no other test pays for the count), and
// measures the bytes live in the whole process while one request is read, decoded, run and
// answered, over those live before it was sent. The client sends from the test's buffer without
// copying it (net::HttpClient writes a span body) and its own allocations are not counted, so
// what is measured is the server's: the body it read, what decoding kept, the answer it wrote.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <malloc.h>

#include "server/inference_server.h"
#include "server/kserve.h"

#if defined(__SANITIZE_ADDRESS__) || defined(GPUOPT_TEST_NO_MALLOC_HOOK)
#define GPUOPT_MALLOC_HOOK 0  // the sanitizers own malloc
#else
#define GPUOPT_MALLOC_HOOK 1
#endif

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
thread_local bool t_uncounted = false;  // the test's client thread: its own buffers are not the server's
}  // namespace

#if GPUOPT_MALLOC_HOOK
namespace {
void note_alloc(void* p) {
  if (!p || t_uncounted) return;
  const auto n = static_cast<int64_t>(malloc_usable_size(p));
  const int64_t v = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (v > peak && !g_peak.compare_exchange_weak(peak, v, std::memory_order_relaxed)) {
  }
}
void note_free(void* p) {
  if (p && !t_uncounted) g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  note_alloc(p);
  return p;
}
void free(void* p) {
  note_free(p);
  __libc_free(p);
}
void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  note_alloc(p);
  return p;
}
void* realloc(void* p, size_t n) {
  const size_t old = p ? malloc_usable_size(p) : 0;
  void* q = __libc_realloc(p, n);
  if ((q || n == 0) && !t_uncounted) g_live.fetch_sub(static_cast<int64_t>(old), std::memory_order_relaxed);
  note_alloc(q);
  return q;
}
void* memalign(size_t align, size_t n) {
  void* p = __libc_memalign(align, n);
  note_alloc(p);
  return p;
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"
#endif

namespace gpuopt::server {
namespace {

namespace fs = std::filesystem;

// INPUT0 [rows, n] f32 -> SUM [rows, 1]: each row's sum (in double, as the test computes it).
class RowSum : public ModelInstance {
 public:
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    const int64_t rows = x.dim(0), n = x.dim(1);
    Tensor out = Tensor::empty(DType::F32, {rows, 1});
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += x.data<float>()[r * n + i];
      out.data<float>()[r] = static_cast<float>(s);
    }
    return std::vector<Tensor>{out};
  }
};

// INPUT0 [rows, n] f32 -> TWICE [rows, n]: an answer as large as the request.
class Twice : public ModelInstance {
 public:
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override {
    Tensor out = Tensor::empty(DType::F32, in[0].shape());
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = 2 * in[0].data<float>()[i];
    return std::vector<Tensor>{out};
  }
};

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("gpuopt_request_memory_" + std::to_string(::getpid()));
  std::unique_ptr<InferenceServer> server;
  std::unique_ptr<net::HttpClient> client;
  Fixture() {
    fs::remove_all(dir);
    fs::create_directories(dir / "rowsum/1");
    std::ofstream(dir / "rowsum/config.pbtxt") << "max_batch_size: 4\ninstance_group { count: 1 kind: KIND_CPU }\n";
    std::ofstream(dir / "rowsum/1/model.onnx") << "fake";
    fs::create_directories(dir / "twice/1");
    std::ofstream(dir / "twice/config.pbtxt") << "max_batch_size: 4\ninstance_group { count: 1 kind: KIND_CPU }\n";
    std::ofstream(dir / "twice/1/model.onnx") << "fake";
    InferenceServerOptions o;
    o.repo.path = dir.string();
    o.repo.loader = [](const std::string& path) -> Result<ModelSource> {
      const bool twice = path.find("twice") != std::string::npos;
      ModelSource src;
      src.inputs = {{"INPUT0", DType::F32, {-1, -1}, true}};
      src.outputs = {{twice ? "TWICE" : "SUM", DType::F32, {-1, twice ? -1 : 1}, true}};
      src.create = [twice](const InstanceSpec&) -> Result<std::unique_ptr<ModelInstance>> {
        if (twice) return std::unique_ptr<ModelInstance>(std::make_unique<Twice>());
        return std::unique_ptr<ModelInstance>(std::make_unique<RowSum>());
      };
      return src;
    };
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.http.threads = 2;
    o.http.max_body_bytes = size_t{256} << 20;
    o.gpu_metrics = false;
    auto s = InferenceServer::start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(s).value();
    client = std::make_unique<net::HttpClient>("127.0.0.1", server ? server->http_port() : 1);
  }
  ~Fixture() {
    client.reset();
    server.reset();
    fs::remove_all(dir);
  }
};

Tensor ramp(int64_t rows, int64_t n) {
  Tensor t = Tensor::empty(DType::F32, {rows, n});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 1000) * 0.25f - 100.f;
  return t;
}

struct Measured {
  size_t body = 0;
  int64_t extra = 0;  // peak live bytes during the request over those live before it
  double ratio() const { return static_cast<double>(extra) / static_cast<double>(body); }
};

// Sends `x` (JSON or binary) to `model`, checks the answer (row sums, or twice x), returns the peak.
Measured measure(Fixture& f, const Tensor& x, bool binary, const std::string& model = "rowsum") {
  // What this thread allocates (the request it sends, the answer it reads: the client runs its
  // I/O here) is not counted; the server's threads are.
  struct Uncounted {
    Uncounted() { t_uncounted = true; }
    ~Uncounted() { t_uncounted = false; }
  } uncounted;
  size_t hlen = 0;
  const std::string body = encode_infer_request({{"INPUT0", x}}, binary, binary, "", &hlen);
  net::Headers headers;
  if (binary) headers.emplace_back("Inference-Header-Content-Length", std::to_string(hlen));
  Measured m;
  m.body = body.size();
  const int64_t before = g_live.load();
  g_peak.store(before);
  auto r = f.client->post("/v2/models/" + model + "/infer", body, headers,
                          binary ? "application/octet-stream" : "application/json");
  m.extra = g_peak.load() - before;
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return m;
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);
  std::optional<size_t> rh;
  if (auto h = r->header("Inference-Header-Content-Length"); !h.empty()) rh = std::stoul(std::string(h));
  auto out = decode_infer_response(r->body, rh);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return m;
  if (model == "twice") {
    const Tensor& y = (*out)[0].second;
    EXPECT_EQ(y.shape(), x.shape());
    if (y.shape() != x.shape()) return m;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (y.data<float>()[i] != 2 * x.data<float>()[i]) {
        ADD_FAILURE() << "element " << i << ": " << y.data<float>()[i] << " != 2 * " << x.data<float>()[i];
        break;
      }
    return m;
  }
  const Tensor& sum = (*out)[0].second;
  EXPECT_EQ(sum.shape(), (Shape{x.dim(0), 1}));
  for (int64_t row = 0; row < x.dim(0); ++row) {
    double want = 0;
    for (int64_t i = 0; i < x.dim(1); ++i) want += x.data<float>()[row * x.dim(1) + i];
    EXPECT_NEAR(sum.get_f64(row), want, std::abs(want) * 1e-6 + 1e-3);
  }
  return m;
}

TEST(RequestMemory, BinaryRequestPeakIsAtMost1_2xItsBody) {
  if (!GPUOPT_MALLOC_HOOK) GTEST_SKIP() << "allocation counting needs the plain allocator (sanitizer build)";
  Fixture f;
  ASSERT_TRUE(f.server);
  measure(f, ramp(1, 1024), true);  // first request: lazily made server state
  const Measured m = measure(f, ramp(2, int64_t{4} << 20), true);  // 32 MiB of f32
  std::printf("binary request: body %.1f MiB, peak %.1f MiB over the idle server (%.2fx the body)\n",
              m.body / 1048576.0, m.extra / 1048576.0, m.ratio());
  EXPECT_GE(m.ratio(), 0.99) << "the body itself must be counted: is the allocation hook active?";
  EXPECT_LE(m.ratio(), 1.2);
}

TEST(RequestMemory, JsonRequestPeakIsAtMost3xItsBody) {
  if (!GPUOPT_MALLOC_HOOK) GTEST_SKIP() << "allocation counting needs the plain allocator (sanitizer build)";
  Fixture f;
  ASSERT_TRUE(f.server);
  measure(f, ramp(1, 1024), false);
  const Measured m = measure(f, ramp(2, int64_t{1} << 20), false);  // 2M numbers, ~17 MB of JSON
  std::printf("JSON request: body %.1f MiB, peak %.1f MiB over the idle server (%.2fx the body)\n",
              m.body / 1048576.0, m.extra / 1048576.0, m.ratio());
  EXPECT_GE(m.ratio(), 0.99);
  EXPECT_LE(m.ratio(), 3.0);
}

// An answer as large as the request: the server holds the body and the output tensor, and sends
// the output from the tensor itself (not copied into a response string): about 2x, not 3x.
TEST(RequestMemory, BinaryAnswerIsSentFromTheOutputTensor) {
  if (!GPUOPT_MALLOC_HOOK) GTEST_SKIP() << "allocation counting needs the plain allocator (sanitizer build)";
  Fixture f;
  ASSERT_TRUE(f.server);
  measure(f, ramp(1, 1024), true, "twice");
  const Measured m = measure(f, ramp(2, int64_t{2} << 20), true, "twice");  // 16 MiB in, 16 MiB out
  std::printf("binary request with an answer as large: body %.1f MiB, peak %.1f MiB (%.2fx the body)\n",
              m.body / 1048576.0, m.extra / 1048576.0, m.ratio());
  EXPECT_LE(m.ratio(), 2.2);
}

}  // namespace
}  // namespace gpuopt::server
