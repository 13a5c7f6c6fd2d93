// parse_device: the one place text becomes a Device.
#include "core/device.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

TEST(Device, ParsesCpuCudaAndIndexedCuda) {
  EXPECT_EQ(parse_device("cpu").value(), Device::cpu());
  EXPECT_EQ(parse_device("cuda").value(), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:0").value(), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:1").value(), Device(DeviceKind::kCuda, 1));
  EXPECT_EQ(parse_device("cuda:17").value().index, 17);
  EXPECT_EQ(parse_device("cuda:1").value().to_string(), "cuda:1");
  EXPECT_EQ(parse_device("cuda").value().to_string(), "cuda:0");
  EXPECT_EQ(parse_device("cpu").value().to_string(), "cpu");
}

TEST(Device, RefusesMalformedTextNamingIt) {
  for (const char* bad : {"tpu", "", "CUDA", "cuda:", "cuda:-1", "cuda:+1", "cuda: 1", "cuda:1x", "cuda:99999999999",
                          "cuda:4096", "cpu:0", "gpu"}) {
    auto d = parse_device(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find(std::string("'") + bad + "'"), std::string::npos) << d.status().to_string();
  }
}

TEST(Device, LiteralsConvertLikeParsedText) {
  const Device a = "cuda:3";
  EXPECT_EQ(a, Device::cuda(3));
  const Device b = "cpu";
  EXPECT_EQ(b, Device::cpu());
  EXPECT_DEATH({ const Device c = "tpu"; (void)c; }, "unknown device 'tpu'");
}

TEST(Device, CountPhrase) {
  EXPECT_EQ(cuda_device_count_phrase(0), "this host has no CUDA device");
  EXPECT_EQ(cuda_device_count_phrase(1), "this host has 1 CUDA device");
  EXPECT_EQ(cuda_device_count_phrase(8), "this host has 8 CUDA devices");
}

}  // namespace
}  // namespace gpuopt
