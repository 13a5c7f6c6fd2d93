// SharedMemoryManager against real POSIX shared memory: register / status / unregister, tensors
// read from and written to a region at offsets, every bounds check, a region that stays mapped
// for a reader after it is unregistered.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "server/shared_memory.h"

namespace gpuopt::server {
namespace {

struct ShmObject {
  std::string key;
  void* p = nullptr;
  size_t n = 0;
  explicit ShmObject(size_t bytes) : key("/gpuopt_shm_test_" + std::to_string(::getpid())), n(bytes) {
    int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
  }
  ~ShmObject() {
    munmap(p, n);
    shm_unlink(key.c_str());
  }
  float* f32(size_t offset) { return reinterpret_cast<float*>(static_cast<char*>(p) + offset); }
};

TEST(SharedMemory, SystemRegionsReadWriteAndBounds) {
  ShmObject obj(4096);
  for (int i = 0; i < 8; ++i) obj.f32(128)[i] = static_cast<float>(i) + 0.5f;
  SharedMemoryManager m;
  // The region is bytes 64..64+1024 of the object.
  ASSERT_TRUE(m.register_system("r", obj.key, 64, 1024).ok());
  EXPECT_EQ(m.register_system("r", obj.key, 0, 16).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(m.register_system("x", "/gpuopt_no_such_key", 0, 16).code(), StatusCode::kNotFound);
  Status big = m.register_system("y", obj.key, 4000, 200);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("does not fit"), std::string::npos) << big.message();
  auto st = m.status(ShmKind::kSystem, "");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->size(), 1u);
  EXPECT_EQ((*st)[0].offset, 64u);
  EXPECT_EQ((*st)[0].byte_size, 1024u);
  EXPECT_EQ(m.status(ShmKind::kSystem, "nope").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(m.status(ShmKind::kCuda, "").value().empty());

  // Object offset 128 = region offset 64.
  auto t = m.read_input("IN", ShmRef{"r", 64, 32}, DType::F32, {2, 4});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t->data<float>()[i], static_cast<float>(i) + 0.5f);
  auto wrong_size = m.read_input("IN", ShmRef{"r", 64, 28}, DType::F32, {2, 4});
  EXPECT_NE(wrong_size.status().message().find("needs 32 bytes"), std::string::npos);
  auto past = m.read_input("IN", ShmRef{"r", 1000, 32}, DType::F32, {2, 4});
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("runs past the end"), std::string::npos) << past.status().message();
  auto huge = m.read_input("IN", ShmRef{"r", UINT64_MAX - 8, 32}, DType::F32, {2, 4});  // no wrap-around
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.read_input("IN", ShmRef{"zz", 0, 32}, DType::F32, {2, 4}).status().message().find("'zz'"),
            std::string::npos);

  Tensor out = Tensor::from_vector<float>(DType::F32, {3}, {1.f, 2.f, 3.f});
  ASSERT_TRUE(m.write_output("OUT", ShmRef{"r", 512, 12}, out).ok());
  EXPECT_EQ(obj.f32(64 + 512)[2], 3.f);
  Status small = m.write_output("OUT", ShmRef{"r", 512, 8}, out);
  EXPECT_NE(small.message().find("needs 12 bytes"), std::string::npos) << small.message();

  // BYTES elements in the binary extension's framing.
  Tensor s = Tensor::empty(DType::String, {2});
  s.strings() = {"ab", "xyz"};
  ASSERT_TRUE(m.write_output("S", ShmRef{"r", 0, 64}, s).ok());
  auto back = m.read_input("S", ShmRef{"r", 0, 4 + 2 + 4 + 3}, DType::String, {2});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->strings()[1], "xyz");

  m.unregister(ShmKind::kSystem, "r");
  EXPECT_TRUE(m.status(ShmKind::kSystem, "").value().empty());
  m.unregister(ShmKind::kSystem, "r");  // again: not an error
}

TEST(SharedMemory, AnAlignedInputIsReadInPlaceAndOutlivesItsRegistration) {
  // As Triton: a numeric input at a 64-byte aligned address is the region's own bytes (what the
  // client writes there later shows through), and stays mapped after an unregister while the
  // tensor lives; an unaligned one is copied (a later write does not show).
  ShmObject obj(8192);
  for (int i = 0; i < 8; ++i) {
    obj.f32(128)[i] = static_cast<float>(i);
    obj.f32(260)[i] = static_cast<float>(i) + 100.f;
  }
  SharedMemoryManager m;
  ASSERT_TRUE(m.register_system("r", obj.key, 0, 8192).ok());  // mmap'd: page-aligned
  auto view = m.read_input("IN", ShmRef{"r", 128, 32}, DType::F32, {2, 4});
  auto copy = m.read_input("IN", ShmRef{"r", 260, 32}, DType::F32, {2, 4});
  ASSERT_TRUE(view.ok() && copy.ok());
  EXPECT_EQ(view->data<float>()[3], 3.f);
  EXPECT_EQ(copy->data<float>()[3], 103.f);
  obj.f32(128)[3] = -1.f;
  obj.f32(260)[3] = -1.f;
  EXPECT_EQ(view->data<float>()[3], -1.f);   // the region itself
  EXPECT_EQ(copy->data<float>()[3], 103.f);  // its own copy
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy->raw()) % 64, 0u);
  m.unregister(ShmKind::kSystem, "r");
  for (int i = 4; i < 8; ++i) EXPECT_EQ(view->data<float>()[i], static_cast<float>(i));  // still mapped
}

TEST(SharedMemory, AnObjectShrunkByItsClientIsAnErrorNotACrash) {
  // The client owns the object and may ftruncate it at any time: before a use, the size check
  // refuses the request; during one (a view read after the shrink), the SIGBUS is caught, the
  // read sees zeros, and intact() tells the request it must fail.
  ShmObject obj(8192);
  for (int i = 0; i < 8; ++i) obj.f32(128)[i] = static_cast<float>(i);
  SharedMemoryManager m;
  ASSERT_TRUE(m.register_system("r", obj.key, 0, 8192).ok());
  auto view = m.read_input("IN", ShmRef{"r", 128, 32}, DType::F32, {2, 4});
  ASSERT_TRUE(view.ok());
  const int fd = shm_open(obj.key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  volatile float got = view->data<float>()[3];  // past the object's end now: SIGBUS, caught
  EXPECT_EQ(got, 0.f);
  const std::vector<std::pair<std::string, ShmRef>> used{{"IN", ShmRef{"r", 128, 32}}};
  Status s = m.intact(used);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shrank while the server used it"), std::string::npos) << s.message();
  // Refused from then on, even once the object is back to its size: the mapping is not the
  // client's memory any more. Registering again makes it usable.
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  auto again = m.read_input("IN", ShmRef{"r", 128, 32}, DType::F32, {2, 4});
  EXPECT_FALSE(again.ok());
  m.unregister(ShmKind::kSystem, "r");
  ASSERT_TRUE(m.register_system("r", obj.key, 0, 8192).ok());
  EXPECT_TRUE(m.read_input("IN", ShmRef{"r", 128, 32}, DType::F32, {2, 4}).ok());
  // Shrunk before a use: the size check answers, naming the sizes.
  ASSERT_EQ(ftruncate(fd, 100), 0);
  auto small = m.read_input("IN", ShmRef{"r", 128, 32}, DType::F32, {2, 4});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("now has 100 bytes"), std::string::npos) << small.status().message();
  EXPECT_FALSE(m.check_output("OUT", ShmRef{"r", 0, 64}).ok());
  ::close(fd);
}

TEST(SharedMemory, NamesAndKeysAreEchoedBounded) {
  SharedMemoryManager m;
  const std::string key = "/" + std::string(1 << 20, 'k');
  Status s = m.register_system("x", key, 0, 64);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(s.message().size(), 1024u) << s.message().size();
  EXPECT_NE(s.message().find("(1048577 bytes)"), std::string::npos);
}

TEST(SharedMemory, Base64OfRawHandles) {
  EXPECT_EQ(base64_decode("aGVsbG8=").value(), "hello");
  EXPECT_EQ(base64_decode("aGVsbG8").value(), "hello");
  EXPECT_FALSE(base64_decode("a$==").has_value());
  EXPECT_FALSE(base64_decode("a").has_value());
}

TEST(SharedMemory, CudaRegionWithoutADeviceIsAClearError) {
  SharedMemoryManager m;
  Status s = m.register_cuda("g", std::string(64, '\0'), 0, 1024);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CUDA shared memory region 'g'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gpuopt::server
