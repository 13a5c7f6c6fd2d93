#include "monitor/process_info.h"

#include "core/env.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace gpuopt::gpu {

const std::string& proc_root() {
  static const std::string root = env_get("GPUOPT_PROC_ROOT").value_or("/proc");
  return root;
}

namespace {

// Reads up to size-1 bytes of a file into buf (NUL-terminated); returns bytes read or -1.
ssize_t read_small(const char* path, char* buf, size_t size) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = ::read(fd, buf + n, size - 1 - n);
    if (r <= 0) break;
    n += size_t(r);
  }
  ::close(fd);
  buf[n] = '\0';
  return ssize_t(n);
}

void copy_truncated(std::string_view s, char* out, size_t out_size) {
  size_t n = std::min(s.size(), out_size - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

}  // namespace

void container_id_from_cgroup(std::string_view cgroup, char* out, size_t out_size) {
  out[0] = '\0';
  // Each line is "hierarchy:controllers:path"; cgroup v2 has one line "0::/path".
  while (!cgroup.empty()) {
    size_t nl = cgroup.find('\n');
    std::string_view line = cgroup.substr(0, nl);
    cgroup = nl == std::string_view::npos ? std::string_view() : cgroup.substr(nl + 1);
    size_t c2 = line.find(':', line.find(':') + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view path = line.substr(c2 + 1);
    // Walk path elements from the end: the innermost id-like element names the container.
    while (!path.empty()) {
      size_t slash = path.rfind('/');
      std::string_view el = slash == std::string_view::npos ? path : path.substr(slash + 1);
      path = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
      if (el.size() > 6 && el.substr(el.size() - 6) == ".scope") el.remove_suffix(6);
      for (std::string_view prefix : {"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"})
        if (el.substr(0, prefix.size()) == prefix) el.remove_prefix(prefix.size());
      if (el.size() == 64 && is_hex(el)) {
        copy_truncated(el, out, out_size);
        return;
      }
    }
  }
}

void fill_process_info(const std::string& root, ProcessSample* p) {
  char path[512];
  char buf[4096];
  p->user[0] = p->command[0] = p->container_id[0] = '\0';

  std::snprintf(path, sizeof path, "%s/%u/cmdline", root.c_str(), p->pid);
  ssize_t n = read_small(path, buf, sizeof buf);
  if (n > 0) {
    while (n > 0 && buf[n - 1] == '\0') --n;  // trailing NUL(s)
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] == '\0' || buf[i] == '\n') buf[i] = ' ';
    copy_truncated(std::string_view(buf, size_t(n)), p->command, sizeof p->command);
  }
  if (!p->command[0]) {  // kernel threads and zombies have no cmdline: use comm
    std::snprintf(path, sizeof path, "%s/%u/comm", root.c_str(), p->pid);
    n = read_small(path, buf, sizeof buf);
    if (n > 0) {
      std::string_view c(buf, size_t(n));
      while (!c.empty() && c.back() == '\n') c.remove_suffix(1);
      copy_truncated(c, p->command, sizeof p->command);
    }
  }

  std::snprintf(path, sizeof path, "%s/%u/status", root.c_str(), p->pid);
  if (read_small(path, buf, sizeof buf) > 0) {
    const char* uid_line = std::strstr(buf, "\nUid:");
    unsigned uid = 0;
    if (uid_line && std::sscanf(uid_line + 5, "%u", &uid) == 1) {
      struct passwd pw;
      struct passwd* res = nullptr;
      char pwbuf[1024];
      if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
        copy_truncated(res->pw_name, p->user, sizeof p->user);
      else
        std::snprintf(p->user, sizeof p->user, "%u", uid);  // no passwd entry: the number
    }
  }

  std::snprintf(path, sizeof path, "%s/%u/cgroup", root.c_str(), p->pid);
  n = read_small(path, buf, sizeof buf);
  if (n > 0) container_id_from_cgroup(std::string_view(buf, size_t(n)), p->container_id, sizeof p->container_id);
}

}  // namespace gpuopt::gpu
