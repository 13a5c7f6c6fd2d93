// The exporter end to end in-process: fake NVML, a real HTTP server on 127.0.0.1, scrapes that
// see each new sample, concurrent scrapes while the body is swapped, /health, and the no-GPU mode.
#include "monitor/exporter.h"

#include "fake_script.h"
#include "net/http.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpuopt::gpu {
namespace {

using nlohmann::json;
using testing::FakeNvmlScript;

TEST(ExporterArgs, ParseListen) {
  std::string h;
  uint16_t p = 0;
  ASSERT_TRUE(parse_listen("0.0.0.0:9400", &h, &p).ok());
  EXPECT_EQ(h, "0.0.0.0");
  EXPECT_EQ(p, 9400);
  ASSERT_TRUE(parse_listen(":9401", &h, &p).ok());
  EXPECT_EQ(h, "0.0.0.0");
  EXPECT_EQ(p, 9401);
  ASSERT_TRUE(parse_listen("[::1]:80", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, 80);
  EXPECT_FALSE(parse_listen("9400", &h, &p).ok());
  EXPECT_FALSE(parse_listen("host:99999", &h, &p).ok());
  EXPECT_FALSE(parse_listen("host:12x", &h, &p).ok());
  EXPECT_FALSE(parse_listen("[::1]9400", &h, &p).ok());
}

TEST(ExporterArgs, ParseInterval) {
  EXPECT_DOUBLE_EQ(*parse_interval("1s"), 1.0);
  EXPECT_DOUBLE_EQ(*parse_interval("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_interval("2.5"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_interval("1m"), 60.0);
  for (const char* bad : {"", "0", "-1s", "fast", "1h", "1 s"}) {
    auto r = parse_interval(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) { EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos); }
  }
}

json one_gpu() {
  return json::parse(R"({"devices": [{"name": "NVIDIA H200", "uuid": "GPU-9",
      "utilization": {"gpu": [11, 22, 33, 44, 55, 66, 77, 88], "memory": 5},
      "memory": {"total": 1073741824, "used": 536870912}, "power_usage_mw": 100000}]})");
}

TEST(Exporter, ScrapesFollowTheSamples) {
  FakeNvmlScript script(one_gpu());
  GPUOPT_REQUIRE_FAKE_NVML(script);
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.interval_s = 0.05;
  auto e = Exporter::start(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  Exporter& ex = **e;
  EXPECT_EQ(ex.gpu_count(), 1u);
  EXPECT_TRUE(ex.no_gpu_reason().empty());
  net::HttpClient c("127.0.0.1", ex.port());
  auto r = c.get("/metrics");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("Content-Type"), kPromContentType);
  // The first sample is taken before the port opens: GPU series from the first scrape on.
  EXPECT_NE(r->body.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-9\""), std::string::npos);
  EXPECT_NE(r->body.find("DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-9\",pci_bus_id=\"\",device=\"nvidia0\",modelName=\"NVIDIA H200\""),
            std::string::npos);
  // Later scrapes see later samples: the scripted utilisation climbs to 88.
  bool saw_88 = false;
  for (int i = 0; i < 100 && !saw_88; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto m = c.get("/metrics");
    ASSERT_TRUE(m.ok());
    saw_88 = m->body.find("modelName=\"NVIDIA H200\",Hostname=") != std::string::npos &&
             m->body.find("} 88\n") != std::string::npos;
  }
  EXPECT_TRUE(saw_88);
  EXPECT_GE(ex.samples(), 8u);
  EXPECT_EQ(c.connects(), 1);  // keep-alive, as Prometheus scrapes
  auto h = c.get("/health");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "ok\n");
  auto nf = c.get("/other");
  ASSERT_TRUE(nf.ok());
  EXPECT_EQ(nf->status, 404);
  ex.stop();
}

TEST(Exporter, ConcurrentScrapesWhileTheBodyIsSwapped) {
  FakeNvmlScript script(one_gpu());
  GPUOPT_REQUIRE_FAKE_NVML(script);
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.interval_s = 0.01;
  o.threads = 4;
  auto e = Exporter::start(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  uint16_t port = (*e)->port();
  std::atomic<int> good{0}, bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      net::HttpClient c("127.0.0.1", port);
      for (int i = 0; i < 100; ++i) {
        auto r = c.get("/metrics");
        bool ok = r.ok() && r->status == 200 && r->body.rfind("# HELP gpuopt_build_info", 0) == 0 &&
                  r->body.find("gpuopt_diagnosis{") != std::string::npos && r->body.back() == '\n';
        (ok ? good : bad)++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(good.load(), 400);
  EXPECT_GE((*e)->scrapes(), 400u);
}

TEST(Exporter, WithoutNvmlStillServesAndSaysWhy) {
  ::setenv("GPUOPT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  auto e = Exporter::start(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->gpu_count(), 0u);
  EXPECT_NE((*e)->no_gpu_reason().find("NVML not found"), std::string::npos);
  net::HttpClient c("127.0.0.1", (*e)->port());
  auto r = c.get("/metrics");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->body.find("gpuopt_exporter_no_gpu{"), std::string::npos);
  EXPECT_EQ(r->body.find("DCGM_"), std::string::npos);
  auto h = c.get("/health");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 200);
}

TEST(Exporter, PortInUseIsAClearError) {
  ::setenv("GPUOPT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  auto a = Exporter::start(o);
  ASSERT_TRUE(a.ok());
  o.listen = "127.0.0.1:" + std::to_string((*a)->port());
  auto b = Exporter::start(o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(std::to_string((*a)->port())), std::string::npos) << b.status().message();
}

}  // namespace
}  // namespace gpuopt::gpu
