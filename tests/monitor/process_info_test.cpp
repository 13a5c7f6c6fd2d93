// /proc parsing against a fake tree: command line, user, and container ids in the cgroup forms
// docker, containerd (Kubernetes, cgroup v1 and v2), CRI-O and podman write.
#include "monitor/process_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpuopt::gpu {
namespace {

namespace fs = std::filesystem;
const std::string kId = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

std::string container(const std::string& cgroup) {
  char out[72];
  container_id_from_cgroup(cgroup, out, sizeof out);
  return out;
}

TEST(ProcessInfo, ContainerIdForms) {
  EXPECT_EQ(container("12:devices:/docker/" + kId + "\n"), kId);
  EXPECT_EQ(container("0::/system.slice/docker-" + kId + ".scope\n"), kId);
  EXPECT_EQ(container("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/"
                      "cri-containerd-" + kId + ".scope\n"),
            kId);
  EXPECT_EQ(container("11:memory:/kubepods/besteffort/pod0b1c/" + kId + "\n"), kId);
  EXPECT_EQ(container("0::/machine.slice/libpod-" + kId + ".scope/container\n"), kId);
  EXPECT_EQ(container("0::/kubepods.slice/crio-" + kId + ".scope\n"), kId);
  EXPECT_EQ(container("0::/user.slice/user-1000.slice/session-3.scope\n"), "");
  EXPECT_EQ(container("0::/\n"), "");
  EXPECT_EQ(container(""), "");
  EXPECT_EQ(container("garbage without colons"), "");
  // Truncation never overflows.
  char small[8];
  container_id_from_cgroup("0::/docker/" + kId, small, sizeof small);
  EXPECT_EQ(std::string(small), kId.substr(0, 7));
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpuopt_proc_" + std::to_string(::getpid()));
    fs::create_directories(root_ / "4242");
    write("4242/cmdline", std::string("/usr/bin/python3\0train.py\0--epochs\0003\0", 38));
    write("4242/status", "Name:\tpython3\nUmask:\t0022\nState:\tS\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n");
    write("4242/cgroup", "0::/system.slice/docker-" + kId + ".scope\n");
    fs::create_directories(root_ / "77");
    write("77/cmdline", "");
    write("77/comm", "kworker/0:1\n");
    write("77/status", "Name:\tkworker\nUid:\t4000000\t4000000\t0\t0\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
  fs::path root_;
};

TEST_F(FakeProc, ReadsCommandUserAndContainer) {
  ProcessSample p;
  p.pid = 4242;
  fill_process_info(root_.string(), &p);
  EXPECT_STREQ(p.command, "/usr/bin/python3 train.py --epochs 3");
  EXPECT_STREQ(p.user, "root");
  EXPECT_EQ(std::string(p.container_id), kId);
}

TEST_F(FakeProc, FallsBackToCommAndNumericUid) {
  ProcessSample p;
  p.pid = 77;
  fill_process_info(root_.string(), &p);
  EXPECT_STREQ(p.command, "kworker/0:1");
  EXPECT_STREQ(p.user, "4000000");
  EXPECT_STREQ(p.container_id, "");
}

TEST_F(FakeProc, MissingProcessLeavesFieldsEmpty) {
  ProcessSample p;
  p.pid = 99999;
  std::snprintf(p.user, sizeof p.user, "stale");
  fill_process_info(root_.string(), &p);
  EXPECT_STREQ(p.command, "");
  EXPECT_STREQ(p.user, "");
  EXPECT_STREQ(p.container_id, "");
}

TEST_F(FakeProc, LongCommandLineIsTruncatedNotOverflowed) {
  write("4242/cmdline", std::string(5000, 'x'));
  ProcessSample p;
  p.pid = 4242;
  fill_process_info(root_.string(), &p);
  EXPECT_EQ(std::strlen(p.command), sizeof p.command - 1);
}

}  // namespace
}  // namespace gpuopt::gpu
