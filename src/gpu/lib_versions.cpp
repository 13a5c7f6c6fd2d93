// Run-time discovery of the CUDA libraries through dlopen (works in builds without CUDA too).
#include "gpu/lib_versions.h"

#include "gpu/cuda_props.h"

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

// Tries each soname; calls `query(handle)` on the first that loads. The handle is closed after:
// the libraries are only asked their version here.
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
    dlclose(h);
    return f;
  }
  f.detail = fmt::format("not found (tried {})", tried);
  return f;
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
    using Fn = int (*)(int*);
    auto fn = reinterpret_cast<Fn>(dlsym(h, "cuDriverGetVersion"));
    int v = 0;
    if (!fn) return *err = "no cuDriverGetVersion", std::optional<std::string>();
    if (int r = fn(&v); r != 0) return *err = fmt::format("cuDriverGetVersion returned {}", r), std::optional<std::string>();
    return std::optional<std::string>(cuda_version_text(v));
  });
  out.cuda_runtime = probe("CUDA runtime", {"libcudart.so.13", "libcudart.so.12", "libcudart.so"},
                           [](void* h, std::string* err) {
                             using Fn = int (*)(int*);
                             auto fn = reinterpret_cast<Fn>(dlsym(h, "cudaRuntimeGetVersion"));
                             int v = 0;
                             if (!fn || fn(&v) != 0) return *err = "cudaRuntimeGetVersion failed", std::optional<std::string>();
                             return std::optional<std::string>(cuda_version_text(v));
                           });
  out.cublaslt = probe("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                       [](void* h, std::string* err) {
                         using Fn = size_t (*)();
                         auto fn = reinterpret_cast<Fn>(dlsym(h, "cublasLtGetVersion"));
                         if (!fn) return *err = "no cublasLtGetVersion", std::optional<std::string>();
                         return std::optional<std::string>(cublas_version_text(static_cast<long>(fn())));
                       });
  out.cudnn = probe("cuDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, [](void* h, std::string* err) {
    using Fn = size_t (*)();
    auto fn = reinterpret_cast<Fn>(dlsym(h, "cudnnGetVersion"));
    if (!fn) return *err = "no cudnnGetVersion", std::optional<std::string>();
    return std::optional<std::string>(cudnn_version_text(static_cast<long>(fn())));
  });
  return out;
}

}  // namespace gpuopt
