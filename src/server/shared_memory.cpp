// System (POSIX shm) and CUDA (IPC handle) shared-memory regions, and tensors read from and
// written to them with every offset and size checked first.
#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "net/http.h"
#include "server/kserve.h"
#include "server/request_body.h"

namespace gpuopt::server {

namespace {

// A client owns the object behind a system region and may shrink it (ftruncate) at any time; a
// read or write past its new end raises SIGBUS. Each mapped region has a slot here; the SIGBUS
// handler finds the slot of the faulting address, maps zero pages over the whole region (the
// access then completes on them instead of killing the process) and marks the slot broken.
// Requests check their regions after use (SharedMemoryManager::intact) and fail with 400; a
// broken region stays refused until it is registered again. Lock-free: the handler may run on
// any thread at any time.
struct GuardSlot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> len{0};
  std::atomic<bool> broken{false};
};
constexpr size_t kGuardSlots = 4096;
GuardSlot g_slots[kGuardSlots];
struct sigaction g_prev_sigbus {};

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
  const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& slot : g_slots) {
    const uintptr_t b = slot.base.load(std::memory_order_acquire);
    const size_t n = slot.len.load(std::memory_order_acquire);
    if (b && a >= b && a - b < n) {
      slot.broken.store(true, std::memory_order_release);
      if (mmap(reinterpret_cast<void*>(b), n, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1,
               0) != MAP_FAILED)
        return;  // the faulting access runs again, on zeros
      break;
    }
  }
  // Not a region of ours: what would have happened without this handler.
  if ((g_prev_sigbus.sa_flags & SA_SIGINFO) && g_prev_sigbus.sa_sigaction) return g_prev_sigbus.sa_sigaction(sig, info, uctx);
  if (g_prev_sigbus.sa_handler != SIG_DFL && g_prev_sigbus.sa_handler != SIG_IGN && g_prev_sigbus.sa_handler)
    return g_prev_sigbus.sa_handler(sig);
  signal(SIGBUS, SIG_DFL);  // returning re-raises the fault, now fatal as it should be
}

// A free slot for a new mapping (nullptr when all are taken: the region is refused).
GuardSlot* guard(void* base, size_t len) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_sigbus);
  });
  constexpr uintptr_t kClaimed = 1;  // taken, not yet filled in (never matches: len is 0)
  for (auto& slot : g_slots) {
    uintptr_t expected = 0;
    if (slot.base.load() != 0 || !slot.base.compare_exchange_strong(expected, kClaimed)) continue;
    slot.broken.store(false);
    slot.len.store(len, std::memory_order_release);
    slot.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return &slot;
  }
  return nullptr;
}

}  // namespace

struct SharedMemoryManager::Region {
  ShmRegionInfo info;
  void* map_base = nullptr;  // system: what mmap returned (length map_len)
  size_t map_len = 0;
  char* data = nullptr;  // first byte of the region (system: map_base + offset; cuda: device pointer)
  bool pinned = false;   // system, on a host with a GPU: the mapping is page-locked (cuda_ipc::pin)
  int fd = -1;           // system: the object, kept open to check its size at each use
  GuardSlot* slot = nullptr;
  ~Region() {
    if (pinned) cuda_ipc::unpin(map_base);
    if (info.kind == ShmKind::kSystem && map_base) munmap(map_base, map_len);
    if (slot) {
      slot->len.store(0, std::memory_order_release);
      slot->base.store(0, std::memory_order_release);
    }
    if (fd >= 0) ::close(fd);
    if (info.kind == ShmKind::kCuda && data) cuda_ipc::close(data, info.device_id);
  }
  // System regions: the object must still hold the registered bytes, and must not have shrunk
  // under a request before (then the mapping is no longer the client's memory).
  Status usable(const std::string& tensor) const {
    if (info.kind != ShmKind::kSystem) return Status::Ok();
    if (slot && slot->broken.load(std::memory_order_acquire))
      return Status::InvalidArgument(
          "'{}': the object behind system shared memory region '{}' shrank while the server used it; unregister "
          "the region and register it again",
          net::printable(tensor), net::printable(info.name));
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < map_len)
      return Status::InvalidArgument(
          "'{}': the object behind system shared memory region '{}' (key '{}') now has {} bytes, less than the "
          "registered offset {} + byte_size {}",
          net::printable(tensor), net::printable(info.name), net::printable(info.key), st.st_size, info.offset,
          info.byte_size);
    return Status::Ok();
  }
};

SharedMemoryManager::~SharedMemoryManager() = default;

namespace {

const char* kind_name(ShmKind k) { return k == ShmKind::kSystem ? "system" : "CUDA"; }

// Byte size of a tensor of `dtype` and `shape` (nullopt for BYTES, whose size depends on its data).
std::optional<uint64_t> fixed_bytes(DType dtype, const Shape& shape) {
  if (dtype == DType::String) return std::nullopt;
  int64_t n = shape_numel(shape);
  return static_cast<uint64_t>(n) * dtype_size(dtype);
}

}  // namespace

Status SharedMemoryManager::register_system(const std::string& name, const std::string& key, uint64_t offset,
                                            uint64_t byte_size) {
  if (name.empty()) return Status::InvalidArgument("shared memory region name is empty");
  if (key.empty())
    return Status::InvalidArgument("system shared memory region '{}': key is empty", net::printable(name));
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (regions_.count(name))
      return Status::AlreadyExists("shared memory region '{}' is already registered", net::printable(name));
  }
  int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int e = errno;
    return e == ENOENT ? Status::NotFound("system shared memory region '{}': key '{}' does not exist",
                                          net::printable(name), net::printable(key))
                       : Status::InvalidArgument("system shared memory region '{}': cannot open key '{}': {}",
                                                 net::printable(name), net::printable(key), std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::InvalidArgument("system shared memory region '{}': fstat of key '{}': {}", net::printable(name),
                                   net::printable(key), std::strerror(e));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (byte_size == 0 || offset > size || byte_size > size - offset) {
    ::close(fd);
    return Status::InvalidArgument(
        "system shared memory region '{}': offset {} + byte_size {} does not fit in key '{}' of {} bytes",
        net::printable(name), offset, byte_size, net::printable(key), size);
  }
  size_t len = static_cast<size_t>(offset + byte_size);
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  auto r = std::make_shared<Region>();
  r->fd = fd;  // closed with the region
  if (base == MAP_FAILED)
    return Status::InvalidArgument("system shared memory region '{}': cannot map key '{}': {}", net::printable(name),
                                   net::printable(key), std::strerror(e));
  r->info = {name, ShmKind::kSystem, key, offset, byte_size, 0};
  r->map_base = base;
  r->map_len = len;
  r->data = static_cast<char*>(base) + offset;
  r->slot = guard(base, len);
  if (!r->slot)
    return Status::Unavailable("system shared memory region '{}': too many regions are registered (at most {})",
                               net::printable(name), kGuardSlots);
  // Page-locked on a host with a GPU, so that an input read in place (read_input) goes to the
  // device by DMA from the client's own memory; regions of gigabytes stay pageable.
  if (len <= (size_t{1} << 30)) r->pinned = cuda_ipc::pin(base, len);
  std::lock_guard<std::mutex> lk(mu_);
  if (!regions_.emplace(name, std::move(r)).second)  // registered by another thread meanwhile
    return Status::AlreadyExists("shared memory region '{}' is already registered", net::printable(name));
  return Status::Ok();
}

Status SharedMemoryManager::register_cuda(const std::string& name, const std::string& raw_handle, int device_id,
                                          uint64_t byte_size) {
  if (name.empty()) return Status::InvalidArgument("shared memory region name is empty");
  if (device_id < 0) return Status::InvalidArgument("CUDA shared memory region '{}': device_id {} is negative", name, device_id);
  if (byte_size == 0) return Status::InvalidArgument("CUDA shared memory region '{}': byte_size is 0", name);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (regions_.count(name))
      return Status::AlreadyExists("shared memory region '{}' is already registered", net::printable(name));
  }
  auto ptr = cuda_ipc::open(raw_handle, device_id);
  if (!ptr.ok()) return ptr.status().with_context(fmt::format("CUDA shared memory region '{}'", name));
  auto r = std::make_shared<Region>();
  r->info = {name, ShmKind::kCuda, "", 0, byte_size, device_id};
  r->data = static_cast<char*>(*ptr);
  std::lock_guard<std::mutex> lk(mu_);
  if (!regions_.emplace(name, std::move(r)).second)
    return Status::AlreadyExists("shared memory region '{}' is already registered", name);
  return Status::Ok();
}

void SharedMemoryManager::unregister(ShmKind kind, const std::string& name) {
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped outside the lock (or when the last request ends)
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second->info.kind == kind && (name.empty() || it->first == name)) {
      dropped.push_back(std::move(it->second));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<std::vector<ShmRegionInfo>> SharedMemoryManager::status(ShmKind kind, const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<ShmRegionInfo> out;
  for (const auto& [n, r] : regions_)
    if (r->info.kind == kind && (name.empty() || n == name)) out.push_back(r->info);
  if (!name.empty() && out.empty())
    return Status::NotFound("{} shared memory region '{}' is not registered", kind_name(kind), net::printable(name));
  return out;
}

Result<std::shared_ptr<SharedMemoryManager::Region>> SharedMemoryManager::find(const std::string& tensor,
                                                                               const ShmRef& ref) const {
  std::shared_ptr<Region> r;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = regions_.find(ref.region);
    if (it == regions_.end())
      return Status::InvalidArgument("'{}': shared memory region '{}' is not registered", net::printable(tensor),
                                     net::printable(ref.region));
    r = it->second;
  }
  GPUOPT_RETURN_IF_ERROR(r->usable(tensor));
  const uint64_t size = r->info.byte_size;
  if (ref.offset > size || ref.byte_size > size - ref.offset)
    return Status::InvalidArgument(
        "'{}': offset {} + byte_size {} runs past the end of shared memory region '{}' ({} bytes)", tensor,
        ref.offset, ref.byte_size, ref.region, size);
  return r;
}

Result<Tensor> SharedMemoryManager::read_input(const std::string& tensor, const ShmRef& ref, DType dtype,
                                               const Shape& shape) const {
  GPUOPT_ASSIGN_OR_RETURN(auto r, find(tensor, ref));
  if (auto want = fixed_bytes(dtype, shape); want && *want != ref.byte_size)
    return Status::InvalidArgument("input '{}': shape {} of {} needs {} bytes but shared_memory_byte_size is {}",
                                   tensor, shape_to_string(shape), dtype_kserve_name(dtype), *want, ref.byte_size);
  if (dtype == DType::String && static_cast<uint64_t>(shape_numel(shape)) > ref.byte_size / 4)
    return Status::InvalidArgument("input '{}': {} BYTES elements cannot fit in {} bytes", tensor,
                                   shape_numel(shape), ref.byte_size);
  const char* src = r->data + ref.offset;
  const size_t n = static_cast<size_t>(ref.byte_size);
  if (r->info.kind == ShmKind::kSystem && dtype != DType::String && reinterpret_cast<uintptr_t>(src) % 64 == 0) {
    // Read in place, as Triton does: the tensor views the region (which stays mapped while the
    // tensor lives, even if unregistered meanwhile). Unaligned offsets get an aligned copy below.
    auto st = std::make_shared<Storage>();
    st->data = const_cast<char*>(src);
    st->bytes = n;
    st->deleter = [r](void*) {};
    return Tensor::wrap(dtype, shape, std::move(st), 0);
  }
  // A CUDA region's bytes come down into pinned memory on a host with a GPU (the upload that
  // follows then goes from there, without the staging copy).
  Tensor pinned = r->info.kind == ShmKind::kCuda && dtype != DType::String ? pinned_batch_tensor(dtype, shape) : Tensor();
  auto t = pinned.defined() ? Result<Tensor>(pinned) : Tensor::try_empty(dtype, shape, "shared memory input");
  if (!t.ok()) return t.status();
  if (r->info.kind == ShmKind::kSystem) {
    GPUOPT_RETURN_IF_ERROR(tensor_from_wire(&*t, std::string_view(src, n), tensor));
    return std::move(t).value();
  }
  if (dtype != DType::String) {
    GPUOPT_RETURN_IF_ERROR(cuda_ipc::copy_to_host(t->raw(), src, n, r->info.device_id));
    return std::move(t).value();
  }
  std::string staged(n, '\0');
  GPUOPT_RETURN_IF_ERROR(cuda_ipc::copy_to_host(staged.data(), src, n, r->info.device_id));
  GPUOPT_RETURN_IF_ERROR(tensor_from_wire(&*t, staged, tensor));
  return std::move(t).value();
}

Status SharedMemoryManager::check_output(const std::string& tensor, const ShmRef& ref) const {
  return find(tensor, ref).status();
}

Status SharedMemoryManager::intact(const std::vector<std::pair<std::string, ShmRef>>& used) const {
  for (const auto& [tensor, ref] : used) {
    std::shared_ptr<Region> r;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = regions_.find(ref.region);
      if (it == regions_.end()) continue;  // unregistered meanwhile: its mapping went with it
      r = it->second;
    }
    GPUOPT_RETURN_IF_ERROR(r->usable(tensor));
  }
  return Status::Ok();
}

Status SharedMemoryManager::write_output(const std::string& tensor, const ShmRef& ref, const Tensor& value) const {
  GPUOPT_ASSIGN_OR_RETURN(auto r, find(tensor, ref));
  const size_t n = tensor_wire_size(value);
  if (n > ref.byte_size)
    return Status::InvalidArgument(
        "output '{}': {} of {} needs {} bytes but shared_memory_byte_size for region '{}' is {}", tensor,
        shape_to_string(value.shape()), dtype_kserve_name(value.dtype()), n, ref.region, ref.byte_size);
  char* dst = r->data + ref.offset;
  if (value.dtype() != DType::String) {
    if (r->info.kind == ShmKind::kSystem) {
      if (n) std::memmove(dst, value.raw(), n);  // the output may be a view of an input in this region
      return Status::Ok();
    }
    return cuda_ipc::copy_to_device(dst, value.raw(), n, r->info.device_id);
  }
  std::string wire;
  wire.reserve(n);
  append_tensor_wire(&wire, value);
  if (r->info.kind == ShmKind::kSystem) {
    std::memcpy(dst, wire.data(), n);
    return Status::Ok();
  }
  return cuda_ipc::copy_to_device(dst, wire.data(), n, r->info.device_id);
}

std::optional<std::string> base64_decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

#ifndef GPUOPT_HAVE_CUDA
namespace cuda_ipc {
Result<void*> open(const std::string&, int) {
  return Status::Unavailable("CUDA shared memory needs a CUDA build of gpuopt (this one is CPU only)");
}
void close(void*, int) {}
Status copy_to_host(void*, const void*, size_t, int) { return Status::Unavailable("no CUDA in this build"); }
Status copy_to_device(void*, const void*, size_t, int) { return Status::Unavailable("no CUDA in this build"); }
Result<void*> alloc_exportable(size_t, int, std::string*) {
  return Status::Unavailable("CUDA shared memory needs a CUDA build of gpuopt (this one is CPU only)");
}
void free_exportable(void*, int) {}
bool pin(void*, size_t) { return false; }
void unpin(void*) {}
}  // namespace cuda_ipc
#endif

}  // namespace gpuopt::server
