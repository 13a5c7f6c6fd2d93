// Triton's shared-memory extensions: regions a client registers by name (system: a POSIX shm
// key, offset and size; CUDA: the raw cudaIpcMemHandle_t of a device allocation), then names in
// a request so that an input is read from, or an output written to, the region instead of
// travelling in the request or response body. HTTP and gRPC share one SharedMemoryManager.
//
//   SharedMemoryManager shm;
//   GPUOPT_RETURN_IF_ERROR(shm.register_system("in0", "/my_key", 0, 4096));
//   ShmRef ref{"in0", 0, 64};                                   // from the request's parameters
//   GPUOPT_ASSIGN_OR_RETURN(Tensor t, shm.read_input("INPUT0", ref, DType::F32, {1, 16}));
//   GPUOPT_RETURN_IF_ERROR(shm.write_output("OUTPUT0", out_ref, result));
//
// Every offset and size is checked against the region before any byte is touched, and a system
// region's object against the registered size at each use (the client may shrink it); errors are
// InvalidArgument naming the tensor, the region and the numbers. A region stays mapped while a
// request that uses it is in flight, even if it is unregistered meanwhile.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::server {

// Where one input or output lives: parameters shared_memory_region / _offset / _byte_size.
struct ShmRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

enum class ShmKind { kSystem, kCuda };

struct ShmRegionInfo {
  std::string name;
  ShmKind kind = ShmKind::kSystem;
  std::string key;      // system
  uint64_t offset = 0;  // system: offset of the region inside the shm object
  uint64_t byte_size = 0;
  int device_id = 0;  // cuda
};

class SharedMemoryManager {
 public:
  SharedMemoryManager() = default;
  ~SharedMemoryManager();
  SharedMemoryManager(const SharedMemoryManager&) = delete;
  SharedMemoryManager& operator=(const SharedMemoryManager&) = delete;

  // Maps `byte_size` bytes at `offset` of the POSIX shm object `key` (shm_open). AlreadyExists
  // when `name` is taken, NotFound when the key does not exist, InvalidArgument when the object
  // is smaller than offset + byte_size.
  Status register_system(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Opens a CUDA IPC handle (64 raw bytes) on `device_id`. Unavailable in a build or on a host
  // without CUDA.
  Status register_cuda(const std::string& name, const std::string& raw_handle, int device_id, uint64_t byte_size);
  // Removes one region ("" = every region of that kind). An unknown name is not an error (as Triton).
  void unregister(ShmKind kind, const std::string& name);
  // Regions of `kind` ("" = all; NotFound naming it when `name` is not registered).
  Result<std::vector<ShmRegionInfo>> status(ShmKind kind, const std::string& name) const;

  // A tensor of `dtype` and `shape` read from the region; ref.byte_size must be its exact size
  // (for BYTES: the 4-byte-length-prefixed elements, as in the binary extension). A numeric
  // tensor at a 64-byte aligned address of a system region is a view of the region (no copy).
  Result<Tensor> read_input(const std::string& tensor, const ShmRef& ref, DType dtype, const Shape& shape) const;
  // Checks that `bytes` fit in ref.byte_size (an output larger than the client's room is an error).
  Status check_output(const std::string& tensor, const ShmRef& ref) const;
  Status write_output(const std::string& tensor, const ShmRef& ref, const Tensor& value) const;
  // After a request ran: InvalidArgument when the object behind one of the system regions it
  // used (tensor name, ref) shrank meanwhile. The server survives such a shrink (the SIGBUS it
  // raises is caught and the region's pages replaced by zeros), but what it read or wrote there
  // is then not the client's data, and the region is refused until registered again.
  Status intact(const std::vector<std::pair<std::string, ShmRef>>& used) const;

  struct Region;

 private:
  Result<std::shared_ptr<Region>> find(const std::string& tensor, const ShmRef& ref) const;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
};

// CUDA IPC, implemented in cuda/shm_cuda.cpp in CUDA builds (Unavailable otherwise).
namespace cuda_ipc {
Result<void*> open(const std::string& raw_handle, int device_id);
void close(void* ptr, int device_id);
Status copy_to_host(void* dst, const void* src, size_t bytes, int device_id);
Status copy_to_device(void* dst, const void* src, size_t bytes, int device_id);
// The client side (gpuopt perf --shared-memory cuda): a device allocation and its IPC handle.
Result<void*> alloc_exportable(size_t bytes, int device_id, std::string* raw_handle);
void free_exportable(void* ptr, int device_id);
// Page-locks host memory for every device (cudaHostRegister, portable); false without CUDA or
// when the driver refuses (the memory then stays pageable). unpin undoes it.
bool pin(void* p, size_t bytes);
void unpin(void* p);
}  // namespace cuda_ipc

// Base64 (RFC 4648) of Triton's HTTP raw_handle {"b64": "..."}; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view in);

}  // namespace gpuopt::server
