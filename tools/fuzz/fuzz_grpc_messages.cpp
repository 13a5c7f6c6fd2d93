// libFuzzer target: gRPC request messages as the server receives them (wire bytes, arbitrary).
// The first byte picks the message: ModelInferRequest (parsed as the ModelStreamInfer path does,
// then decoded with small limits, its shared-memory inputs read from a region this target
// registered), SystemSharedMemoryRegister / Status / Unregister, or CudaSharedMemoryRegister; the
// rest are its bytes. Every error becomes the grpc::Status the client would get, whose message
// must be bounded and valid UTF-8 (it travels as a header).
#include "grpc_service.pb.h"
#include "net/http.h"
#include "server/grpc_codec.h"
#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

namespace pb = inference;
using gpuopt::Status;
using gpuopt::server::SharedMemoryManager;
using gpuopt::server::ShmKind;

void check(const Status& s) {
  const grpc::Status g = gpuopt::server::to_grpc_status(s);
  if (g.error_message().size() > gpuopt::server::kMaxGrpcMessageBytes + 32) std::abort();
  if (!gpuopt::net::valid_utf8(g.error_message())) std::abort();
}

// One 64 KiB region named "fuzz" (key private to this process), registered once.
SharedMemoryManager& shm() {
  static SharedMemoryManager* m = [] {
    auto* x = new SharedMemoryManager();
    const std::string key = "/gpuopt_fuzz_" + std::to_string(::getpid());
    const int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, 1 << 16) == 0) (void)x->register_system("fuzz", key, 0, 1 << 16);
      ::close(fd);
      shm_unlink(key.c_str());  // the mapping stays; nothing is left behind in /dev/shm
    }
    return x;
  }();
  return *m;
}

// Keys a fuzz input names are kept inside this process's own namespace.
std::string own_key(const std::string& k) { return "/gpuopt_fuzz_x" + k.substr(0, 64); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  gpuopt::server::DecodeLimits limits;
  limits.max_memory_bytes = 4 << 20;
  limits.max_structure_bytes = 1 << 20;
  switch (data[0] % 5) {
    case 0: {
      pb::ModelInferRequest req;
      Status s = gpuopt::server::parse_infer_request(bytes, &req);
      check(s);
      if (!s.ok()) break;
      auto r = gpuopt::server::decode_grpc_request(&req, limits);
      if (!r.ok()) {
        check(r.status());
        break;
      }
      for (const auto& in : r->inputs)
        if (in.shm) {
          auto t = shm().read_input(in.name, *in.shm, in.dtype, in.shape);
          if (!t.ok()) check(t.status());
        }
      for (const auto& out : r->outputs)
        if (out.shm) check(shm().check_output(out.name, *out.shm));
      break;
    }
    case 1: {
      pb::SystemSharedMemoryRegisterRequest req;
      if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) break;
      if (req.name() == "fuzz") break;  // the shared region stays
      Status s = shm().register_system(req.name(), own_key(req.key()), req.offset(), req.byte_size());
      check(s);
      if (s.ok()) shm().unregister(ShmKind::kSystem, req.name());
      break;
    }
    case 2: {
      pb::SystemSharedMemoryStatusRequest req;
      if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) break;
      auto st = shm().status(ShmKind::kSystem, req.name());
      if (!st.ok()) check(st.status());
      break;
    }
    case 3: {
      pb::SystemSharedMemoryUnregisterRequest req;
      if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) break;
      if (req.name().empty() || req.name() == "fuzz") break;
      shm().unregister(ShmKind::kSystem, req.name());
      break;
    }
    default: {
      pb::CudaSharedMemoryRegisterRequest req;
      if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) break;
      if (req.device_id() < 0 || req.device_id() > 64) break;  // the server refuses these before
      Status s = shm().register_cuda(req.name(), req.raw_handle(), static_cast<int>(req.device_id()), req.byte_size());
      check(s);
      if (s.ok()) shm().unregister(ShmKind::kCuda, req.name());
      break;
    }
  }
  return 0;
}
