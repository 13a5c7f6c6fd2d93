// Run-time discovery of the CUDA libraries through dlopen (works in builds without CUDA too).
#include "monitor/lib_versions.h"

#include "monitor/cuda_props.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <initializer_list>

namespace gpuopt {
namespace {

std::string loaded_path(void* handle) {
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) return lm->l_name;
  return {};
}

// Tries each soname; calls `query(handle)` on the first that loads. The handle stays open for
// the life of the process: the libraries' constructors allocate (cuDNN, cuBLASLt), and closing
// them unmaps the globals that point at that memory, which then leaks (72 KB under LSan). The
// CUDA backend keeps the same libraries loaded anyway.
template <typename Query>
FoundLibrary probe(const char* name, std::initializer_list<const char*> sonames, Query query) {
  FoundLibrary f;
  f.name = name;
  std::string tried;
  for (const char* so : sonames) {
    void* h = dlopen(so, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
      tried += tried.empty() ? so : fmt::format(", {}", so);
      continue;
    }
    f.path = loaded_path(h);
    if (f.path.empty()) f.path = so;
    std::string err;
    f.version = query(h, &err);
    if (!f.version) f.detail = err;
    return f;
  }
  f.detail = fmt::format("not found (tried {})", tried);
  return f;
}

// `int f(int*)` returning 0 on success (cuDriverGetVersion, cudaRuntimeGetVersion) -> "13.0".
std::optional<std::string> int_version(void* h, const char* symbol, std::string* err) {
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, symbol));
  if (!fn) {
    *err = fmt::format("no {}", symbol);
    return std::nullopt;
  }
  int v = 0;
  if (int r = fn(&v); r != 0) {
    *err = fmt::format("{} returned {}", symbol, r);
    return std::nullopt;
  }
  return cuda_version_text(v);
}

// `size_t f(void)` (cublasLtGetVersion, cudnnGetVersion).
std::optional<long> size_version(void* h, const char* symbol, std::string* err) {
  using Fn = size_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(h, symbol));
  if (!fn) {
    *err = fmt::format("no {}", symbol);
    return std::nullopt;
  }
  return static_cast<long>(fn());
}

}  // namespace

std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

std::string cublas_version_text(long v) { return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100); }

std::string cudnn_version_text(long v) {
  if (v >= 90000) return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);  // cuDNN 9+
  return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);                    // cuDNN <= 8
}

LibraryVersions library_versions() {
  LibraryVersions out;
  fill_built_versions(&out);
  if (auto v = cuda_runtime_version_linked(); v.ok()) out.cuda_runtime_linked = cuda_version_text(*v);

  out.cuda_driver = probe("CUDA driver", {"libcuda.so.1", "libcuda.so"}, [](void* h, std::string* err) {
    return int_version(h, "cuDriverGetVersion", err);
  });
  out.cuda_runtime = probe("CUDA runtime", {"libcudart.so.13", "libcudart.so.12", "libcudart.so"},
                           [](void* h, std::string* err) { return int_version(h, "cudaRuntimeGetVersion", err); });
  out.cublaslt = probe("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                       [](void* h, std::string* err) -> std::optional<std::string> {
                         auto v = size_version(h, "cublasLtGetVersion", err);
                         if (!v) return std::nullopt;
                         return cublas_version_text(*v);
                       });
  out.cudnn = probe("cuDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"},
                    [](void* h, std::string* err) -> std::optional<std::string> {
                      auto v = size_version(h, "cudnnGetVersion", err);
                      if (!v) return std::nullopt;
                      return cudnn_version_text(*v);
                    });
  return out;
}

}  // namespace gpuopt
