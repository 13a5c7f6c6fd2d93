// `gpuopt perf`'s client-side shared-memory regions (perf_shm_region.h).
#include "cli/perf_shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/shared_memory.h"

namespace gpuopt::cli {

Region::~Region() {
  if (!ptr) return;
  if (cuda) {
    server::cuda_ipc::free_exportable(ptr, 0);
  } else {
    munmap(ptr, bytes);
    shm_unlink(key.c_str());
  }
}


Result<std::unique_ptr<Region>> make_region(const std::string& name, size_t bytes, bool cuda) {
  auto r = std::make_unique<Region>();
  r->name = name;
  r->bytes = std::max<size_t>(bytes, 1);
  r->cuda = cuda;
  if (cuda) {
    GPUOPT_ASSIGN_OR_RETURN(r->ptr, server::cuda_ipc::alloc_exportable(r->bytes, 0, &r->raw_handle));
    return r;
  }
  r->key = "/" + name;
  int fd = shm_open(r->key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0) return Status::Unavailable("shm_open '{}': {}", r->key, std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(r->bytes)) != 0) {
    int e = errno;
    ::close(fd);
    shm_unlink(r->key.c_str());
    return Status::Unavailable("ftruncate '{}' to {} bytes: {}", r->key, r->bytes, std::strerror(e));
  }
  void* p = mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(r->key.c_str());
    return Status::Unavailable("mmap '{}': {}", r->key, std::strerror(errno));
  }
  r->ptr = p;
  return r;
}

Status write_region(Region& r, size_t offset, const std::string& bytes) {
  if (r.cuda) return server::cuda_ipc::copy_to_device(static_cast<char*>(r.ptr) + offset, bytes.data(), bytes.size(), 0);
  std::memcpy(static_cast<char*>(r.ptr) + offset, bytes.data(), bytes.size());
  return Status::Ok();
}

}  // namespace gpuopt::cli
