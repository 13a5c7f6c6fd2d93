// `gpuopt version`: what this binary was built with and what it finds at run time.
#include "backends/cpu_fast/conv_dnnl.h"
#include "cli/command.h"
#include "monitor/lib_versions.h"
#include "gpuopt/build_info.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpuopt::cli {
namespace {

nlohmann::json opt(const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json found_json(const FoundLibrary& f) {
  return {{"version", opt(f.version)}, {"path", f.path}, {"detail", f.detail}};
}

std::string found_text(const FoundLibrary& f) {
  if (f.version) return fmt::format("{} ({})", *f.version, f.path);
  return f.path.empty() ? f.detail : fmt::format("found {} but {}", f.path, f.detail);
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the version, git hash and library versions");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    LibraryVersions v = library_versions();
    const std::string dnnl = cpu_fast::dnnl_version();
    nlohmann::json j = {{"version", GPUOPT_VERSION_STRING},
                        {"git_hash", GPUOPT_GIT_HASH},
                        {"build_type", GPUOPT_BUILD_TYPE},
                        {"compiler", GPUOPT_CXX_COMPILER},
                        {"cuda_toolkit", GPUOPT_CUDA_TOOLKIT_VERSION},
                        {"cuda_archs", GPUOPT_CUDA_ARCHS_STRING},
                        {"libraries",
                         {{"built", {{"cuda_runtime", opt(v.cuda_runtime_built)},
                                     {"cublas", opt(v.cublas_built)},
                                     {"cudnn", opt(v.cudnn_built)}}},
                          {"linked", {{"cuda_runtime", opt(v.cuda_runtime_linked)}}},
                          {"found", {{"cuda_driver", found_json(v.cuda_driver)},
                                     {"cuda_runtime", found_json(v.cuda_runtime)},
                                     {"cublaslt", found_json(v.cublaslt)},
                                     {"cudnn", found_json(v.cudnn)}}},
                          // The fast CPU backend's oneDNN (null: built without it).
                          {"cpu", {{"onednn", dnnl.empty() ? nlohmann::json(nullptr) : nlohmann::json(dnnl)}}}}}};
    if (*json) {
      fmt::print("{}\n", j.dump(2));
      return;
    }
    auto built = [](const std::optional<std::string>& s) { return s.value_or("none"); };
    fmt::print("gpuopt {} ({})\n", GPUOPT_VERSION_STRING, GPUOPT_GIT_HASH);
    fmt::print("  built with      {} ({}), CUDA toolkit {} (archs {})\n", GPUOPT_CXX_COMPILER, GPUOPT_BUILD_TYPE,
               GPUOPT_CUDA_TOOLKIT_VERSION, GPUOPT_CUDA_ARCHS_STRING);
    fmt::print("  built against   CUDA runtime {}, cuBLAS {}, cuDNN {}\n", built(v.cuda_runtime_built),
               built(v.cublas_built), built(v.cudnn_built));
    if (v.cuda_runtime_linked) fmt::print("  linked          CUDA runtime {} (static)\n", *v.cuda_runtime_linked);
    fmt::print("  found           CUDA driver   {}\n", found_text(v.cuda_driver));
    fmt::print("                  CUDA runtime  {}\n", found_text(v.cuda_runtime));
    fmt::print("                  cuBLASLt      {}\n", found_text(v.cublaslt));
    fmt::print("                  cuDNN         {}\n", found_text(v.cudnn));
    fmt::print("  CPU backend     oneDNN {}\n", dnnl.empty() ? "not built in" : dnnl);
  });
}
GPUOPT_REGISTER_COMMAND(90, setup);

}  // namespace
}  // namespace gpuopt::cli
