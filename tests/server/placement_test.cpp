// Instance placement over a simulated list of CUDA devices (no GPU needed): Triton's rules for
// instance_group kind, count and gpus, and a GPU the host does not have refused naming it.
#include "server/placement.h"

#include <gtest/gtest.h>

namespace gpuopt::server {
namespace {

InstanceGroup group(std::string name, InstanceKind kind, int count, std::vector<int> gpus = {}) {
  InstanceGroup g;
  g.name = std::move(name);
  g.kind = kind;
  g.count = count;
  g.gpus = std::move(gpus);
  return g;
}

std::vector<std::string> where(const std::vector<PlacedInstance>& p) {
  std::vector<std::string> out;
  for (const auto& i : p) out.push_back(i.name + "@" + i.device.to_string());
  return out;
}

TEST(Placement, GpuGroupMakesCountInstancesOnEachListedGpu) {
  auto p = place_instances("m", {group("g", InstanceKind::kGpu, 2, {1, 3})}, 4);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(where(*p), (std::vector<std::string>{"g_0@cuda:1", "g_1@cuda:1", "g_2@cuda:3", "g_3@cuda:3"}));
  for (const auto& i : *p) EXPECT_EQ(i.group, "g");
}

TEST(Placement, GpuGroupWithoutGpusSpreadsOverEveryGpu) {
  auto p = place_instances("m", {group("g", InstanceKind::kGpu, 1)}, 3);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(where(*p), (std::vector<std::string>{"g_0@cuda:0", "g_1@cuda:1", "g_2@cuda:2"}));
}

TEST(Placement, AutoIsGpuWhenThereIsOneElseCpu) {
  auto gpu = place_instances("m", {group("a", InstanceKind::kAuto, 2)}, 2);
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(where(*gpu), (std::vector<std::string>{"a_0@cuda:0", "a_1@cuda:0", "a_2@cuda:1", "a_3@cuda:1"}));
  auto cpu = place_instances("m", {group("a", InstanceKind::kAuto, 2)}, 0);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(where(*cpu), (std::vector<std::string>{"a_0@cpu", "a_1@cpu"}));
}

TEST(Placement, GroupsAddUpAndNamesCountOverTheModel) {
  auto p = place_instances("m", {group("c", InstanceKind::kCpu, 1), group("g", InstanceKind::kGpu, 1, {0})}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(where(*p), (std::vector<std::string>{"c_0@cpu", "g_1@cuda:0"}));
}

TEST(Placement, MissingGpuIsRefusedNamingIt) {
  auto p = place_instances("resnet", {group("g", InstanceKind::kGpu, 1, {1})}, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "model 'resnet': instance_group 'g': cuda:1 does not exist: this host has 1 CUDA device");
  auto none = place_instances("resnet", {group("g", InstanceKind::kGpu, 1, {0})}, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("cuda:0 does not exist: this host has no CUDA device"), std::string::npos)
      << none.status().to_string();
  auto any = place_instances("resnet", {group("g", InstanceKind::kGpu, 1)}, 0);
  ASSERT_FALSE(any.ok());
  EXPECT_NE(any.status().message().find("KIND_GPU but this host has no CUDA device"), std::string::npos)
      << any.status().to_string();
}

TEST(Placement, BadGpuListsAreRefused) {
  EXPECT_FALSE(place_instances("m", {group("g", InstanceKind::kGpu, 1, {-1})}, 2).ok());
  auto cpu = place_instances("m", {group("c", InstanceKind::kCpu, 1, {0})}, 2);
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.status().message().find("KIND_CPU but lists gpus"), std::string::npos);
}

TEST(Placement, ZeroCountMakesNoInstance) {
  auto p = place_instances("m", {group("g", InstanceKind::kGpu, 0, {0})}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

}  // namespace
}  // namespace gpuopt::server
