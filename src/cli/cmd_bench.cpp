// `gpuopt bench`: the hardware's real ceilings — memory, compute, roofline, latency and the
// CPU-vs-GPU matrix multiply — as tables, JSON, SVG plots and an HTML report (docs/bench.md).
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/suite.h"
#include "cli/command.h"
#include "cli/device_option.h"
#include "core/table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

namespace gpuopt::cli {
namespace {

using bench::Section;
using bench::SuiteOptions;

struct Options {
  int device = 0;
  int repeat = 0;
  bool json = false;
  bool quiet = false;
  bool check = false;
  std::string sizes, transfer_sizes, types, report, svg = "roofline.svg";
  std::string memory_sizes, gemm_sizes, cpu_sizes;
  int algos = 4;
  int f32_max_n = 0;
  bool no_fma = false, no_gemm = false;
  uint64_t words = uint64_t{1} << 26;
};

void add_common(CLI::App* c, Options& o) {
  // --device as everywhere (cli/device_option.h), a CUDA device here; a bare index N is cuda:N.
  add_device_option_with(c, "CUDA device: cuda, cuda:N or N (default cuda:0)",
                         [&o](const std::string&, const Device& d) {
                           if (!d.is_cuda())
                             throw CLI::ValidationError("--device", "bench times a CUDA device: cuda, cuda:N or N");
                           o.device = d.index;
                         })
      ->transform(
          [](std::string text) {
            return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos ? "cuda:" + text : text;
          },
          "", "index");
  c->add_option("--repeat", o.repeat, "Timed samples per measurement (median reported; default per benchmark)")
      ->check(int_range(1, 100000));
  c->add_flag("--json", o.json, "Print JSON instead of tables");
  c->add_flag("--quiet,-q", o.quiet, "No progress lines on stderr");
  c->add_flag("--check", o.check, "Check the kernels against CPU references before timing");
}

Result<SuiteOptions> make_suite(const Options& o) {
  SuiteOptions s;
  s.device = o.device;
  s.repeat = o.repeat;
  s.check = o.check;
  s.max_algos = o.algos;
  s.f32_max_n = o.f32_max_n;
  s.fma = !o.no_fma;
  s.gemm = !o.no_gemm;
  s.roofline_words = o.words;
  if (!o.quiet) {
    const bool tty = isatty(STDERR_FILENO);
    s.progress = [tty](const std::string& line) {
      if (tty)
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      else
        std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    };
  }
  return s;
}

// Clears the progress line before the table is printed.
void end_progress(const Options& o) {
  if (!o.quiet && isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K");
}

std::string device_line(const bench::GpuContext& g) {
  if (!g.device) return fmt::format("GPU: none ({})\n", g.why_not);
  const auto& d = *g.device;
  return fmt::format("GPU {}: {} (compute capability {}.{}, {} SMs, max SM clock {} MHz, {} memory, L2 {}, NVML {})\n",
                     d.index, d.name, d.cc_major, d.cc_minor, d.sm_count, d.sm_clock_khz / 1000,
                     format_bytes(static_cast<double>(d.total_mem_bytes)),
                     format_bytes(static_cast<double>(d.l2_bytes)), g.telemetry.available() ? "yes" : "n/a");
}

int print_section(const Options& o, const bench::GpuContext& g, const Section& s) {
  end_progress(o);
  if (o.json) {
    fmt::print("{}\n",
               nlohmann::json({{"device", bench::context_json(g)}, {"section", bench::section_to_json(s)}}).dump(2));
  } else {
    fmt::print("{}\n{}", device_line(g), bench::render_table(s));
  }
  return kExitOk;
}

template <typename Fill>
int run_one(const Options& o, Fill&& fill, Section (*bench_fn)(const SuiteOptions&, const bench::GpuContext&),
            const std::function<Status(const Section&)>& after = nullptr) {
  auto s = make_suite(o);
  if (!s.ok()) return report_error(s.status(), true);
  if (Status st = fill(&*s); !st.ok()) return report_error(st, st.code() == StatusCode::kInvalidArgument);
  bench::apply_defaults(&*s);
  const bench::GpuContext g = bench::open_gpu(o.device);
  if (!g.device && g.why_not.find("--device") != std::string::npos)
    return report_error(Status::InvalidArgument("{}", g.why_not), true);
  const Section sec = bench_fn(*s, g);
  if (after) {
    if (Status st = after(sec); !st.ok()) return report_error(st);
  }
  return print_section(o, g, sec);
}

Status parse_types(const std::string& text, SuiteOptions* s, bool gemm) {
  if (text.empty()) return Status::Ok();
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (gemm) {
      bench::GemmType t;
      if (!bench::parse_gemm_type(item, &t))
        return Status::InvalidArgument("--types: '{}' is not one of f32, tf32, f16, bf16, fp8, int8", item);
      s->gemm_types.push_back(t);
    } else if (item == "f32") {
      s->roofline_types.push_back(bench::RooflineType::F32);
    } else if (item == "f16") {
      s->roofline_types.push_back(bench::RooflineType::F16);
    } else {
      return Status::InvalidArgument("--types: '{}' is not one of f32, f16", item);
    }
  }
  return Status::Ok();
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return Status::InvalidArgument("cannot write '{}'", path);
  return Status::Ok();
}

void setup(CLI::App& app) {
  auto* bench =
      app.add_subcommand("bench", "Measure the hardware's real ceilings (bandwidth, FLOP/s, roofline, latency)");
  bench->require_subcommand(1);

  // memory
  {
    auto o = std::make_shared<Options>();
    auto* c = bench->add_subcommand("memory", "Device memory bandwidth (copy, read, write), H2D/D2H, P2P");
    add_common(c, *o);
    c->add_option("--sizes", o->sizes, "Device-side sizes, e.g. 1M,64M,4G (default 1 MiB..4 GiB, powers of two)");
    c->add_option("--transfer-sizes", o->transfer_sizes, "Host<->device sizes (default 1M,16M,256M)");
    c->callback([o] {
      set_exit_code(run_one(
          *o,
          [&](SuiteOptions* s) -> Status {
            if (!o->sizes.empty()) {
              GPUOPT_ASSIGN_OR_RETURN(s->memory_sizes, bench::parse_byte_sizes(o->sizes));
            }
            if (!o->transfer_sizes.empty()) {
              GPUOPT_ASSIGN_OR_RETURN(s->transfer_sizes, bench::parse_byte_sizes(o->transfer_sizes));
            }
            for (uint64_t b : s->memory_sizes)
              if (b % 16) return Status::InvalidArgument("--sizes: {} is not a multiple of 16 bytes", b);
            return Status::Ok();
          },
          bench::bench_memory));
    });
  }
  // compute
  {
    auto o = std::make_shared<Options>();
    auto* c = bench->add_subcommand("compute", "FMA throughput (f32, f16x2, f64) and cuBLASLt GEMM TFLOP/s");
    add_common(c, *o);
    c->add_option("--sizes", o->sizes, "GEMM sizes n (default 1024,2048,4096,8192,16384)");
    c->add_option("--types", o->types, "GEMM types: f32,tf32,f16,bf16,fp8,int8 (default all)");
    c->add_option("--algos", o->algos, "cuBLASLt heuristic candidates timed per size (default 4)")
        ->check(int_range(1, 32));
    c->add_option("--f32-max-n", o->f32_max_n, "Skip strict-f32 GEMM above this n (slow; default no limit)");
    c->add_flag("--no-fma", o->no_fma, "Skip the FMA kernels");
    c->add_flag("--no-gemm", o->no_gemm, "Skip the GEMMs");
    c->callback([o] {
      set_exit_code(run_one(
          *o,
          [&](SuiteOptions* s) -> Status {
            if (!o->sizes.empty()) {
              GPUOPT_ASSIGN_OR_RETURN(s->gemm_sizes, bench::parse_ints(o->sizes));
            }
            for (int n : s->gemm_sizes)
              if (n % 16) return Status::InvalidArgument("--sizes: {} is not a multiple of 16 (fp8/int8 need it)", n);
            return parse_types(o->types, s, true);
          },
          bench::bench_compute));
    });
  }
  // roofline
  {
    auto o = std::make_shared<Options>();
    auto* c = bench->add_subcommand("roofline", "Empirical roofline: intensity 1/8..1024 FLOP/byte in f32 and f16");
    add_common(c, *o);
    c->add_option("--types", o->types, "f32,f16 (default both)");
    c->add_option("--words", o->words, "4-byte words per launch (default 2^26 = 256 MiB each way)")
        ->check(int_range(4, int64_t{1} << 32));
    c->add_option("--svg", o->svg, "Where to write the plot ('' for none; default roofline.svg)");
    c->callback([o] {
      set_exit_code(run_one(
          *o,
          [&](SuiteOptions* s) -> Status {
            if (o->words % 4) return Status::InvalidArgument("--words {}: must be a multiple of 4", o->words);
            return parse_types(o->types, s, false);
          },
          bench::bench_roofline,
          [o](const Section& s) -> Status {
            if (o->svg.empty() || s.skipped || s.results.empty()) return Status::Ok();
            GPUOPT_RETURN_IF_ERROR(write_text(o->svg, bench::render_svg(bench::roofline_plot(s))));
            if (!o->json) std::fprintf(stderr, "wrote %s\n", o->svg.c_str());
            return Status::Ok();
          }));
    });
  }
  // latency
  {
    auto o = std::make_shared<Options>();
    auto* c = bench->add_subcommand("latency",
                                    "Launch latency, event round trip, cudaMalloc vs pool, CUDA graph vs launches");
    add_common(c, *o);
    c->callback([o] {
      set_exit_code(run_one(
          *o, [](SuiteOptions*) { return Status::Ok(); }, bench::bench_latency));
    });
  }
  // cpu-vs-gpu
  {
    auto o = std::make_shared<Options>();
    auto* c = bench->add_subcommand("cpu-vs-gpu", "Matrix multiply on the CPU (OpenBLAS) and the GPU (cuBLASLt)");
    add_common(c, *o);
    c->add_option("--sizes", o->sizes, "Matrix sizes n (default 256,512,1024,2048,4096,8192)");
    c->callback([o] {
      set_exit_code(run_one(
          *o,
          [&](SuiteOptions* s) -> Status {
            if (!o->sizes.empty()) {
              GPUOPT_ASSIGN_OR_RETURN(s->cpu_sizes, bench::parse_ints(o->sizes));
            }
            return Status::Ok();
          },
          bench::bench_cpu_vs_gpu));
    });
  }
  // all
  {
    auto o = std::make_shared<Options>();
    o->f32_max_n = 8192;
    auto* c = bench->add_subcommand("all", "Every benchmark; --report DIR writes bench.json, SVG plots and index.html");
    add_common(c, *o);
    c->add_option("--report", o->report, "Directory for bench.json, *.svg and index.html");
    c->add_option("--memory-sizes", o->memory_sizes, "As `bench memory --sizes`");
    c->add_option("--transfer-sizes", o->transfer_sizes, "As `bench memory --transfer-sizes`");
    c->add_option("--gemm-sizes", o->gemm_sizes, "As `bench compute --sizes`");
    c->add_option("--cpu-sizes", o->cpu_sizes, "As `bench cpu-vs-gpu --sizes`");
    c->add_option("--algos", o->algos, "cuBLASLt candidates timed per size (default 4)")->check(int_range(1, 32));
    c->add_option("--f32-max-n", o->f32_max_n, "Skip strict-f32 GEMM above this n (default 8192)");
    c->callback([o] {
      auto s = make_suite(*o);
      Status st = Status::Ok();
      auto parse = [&]() -> Status {
        if (!o->memory_sizes.empty()) {
          GPUOPT_ASSIGN_OR_RETURN(s->memory_sizes, bench::parse_byte_sizes(o->memory_sizes));
        }
        if (!o->transfer_sizes.empty()) {
          GPUOPT_ASSIGN_OR_RETURN(s->transfer_sizes, bench::parse_byte_sizes(o->transfer_sizes));
        }
        if (!o->gemm_sizes.empty()) {
          GPUOPT_ASSIGN_OR_RETURN(s->gemm_sizes, bench::parse_ints(o->gemm_sizes));
        }
        if (!o->cpu_sizes.empty()) {
          GPUOPT_ASSIGN_OR_RETURN(s->cpu_sizes, bench::parse_ints(o->cpu_sizes));
        }
        return Status::Ok();
      };
      if (st = parse(); !st.ok()) return set_exit_code(report_error(st, true));
      bench::apply_defaults(&*s);
      const bench::GpuContext g = bench::open_gpu(o->device);
      if (!g.device && g.why_not.find("--device") != std::string::npos)
        return set_exit_code(report_error(Status::InvalidArgument("{}", g.why_not), true));
      // A --report folder that cannot be made is refused before minutes of work, not after.
      if (!o->report.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o->report, ec);
        if (ec)
          return set_exit_code(report_error(Status::InvalidArgument(
              "--report '{}': cannot create the directory: {}", o->report, ec.message())));
      }
      // Said before the work, not after it: without a GPU only the CPU side of cpu-vs-gpu runs.
      if (!g.device)
        std::fprintf(stderr,
                     "gpuopt bench all: no GPU (%s): only the CPU GEMMs of cpu-vs-gpu run (minutes on a "
                     "small machine; --cpu-sizes shortens them)\n",
                     g.why_not.c_str());
      std::vector<Section> sections = {bench::bench_memory(*s, g), bench::bench_compute(*s, g),
                                       bench::bench_roofline(*s, g), bench::bench_latency(*s, g),
                                       bench::bench_cpu_vs_gpu(*s, g)};
      end_progress(*o);
      const nlohmann::json dev = bench::context_json(g);
      const auto summary = bench::summarize(sections, dev.value("name", ""));
      if (!o->report.empty()) {
        if (st = bench::write_report(o->report, sections, dev); !st.ok()) return set_exit_code(report_error(st));
      }
      if (o->json) {
        nlohmann::json j = {
            {"device", dev}, {"summary", bench::summary_to_json(summary)}, {"sections", nlohmann::json::array()}};
        for (const auto& sec : sections) j["sections"].push_back(bench::section_to_json(sec));
        fmt::print("{}\n", j.dump(2));
      } else {
        fmt::print("{}\n", device_line(g));
        for (const auto& sec : sections) fmt::print("{}\n", bench::render_table(sec));
        fmt::print("{}", bench::render_summary_table(summary));
      }
      if (!o->report.empty() && !o->quiet)
        std::fprintf(stderr, "report: %s\n", (std::filesystem::path(o->report) / "index.html").lexically_normal().c_str());
      set_exit_code(kExitOk);
    });
  }
}
GPUOPT_REGISTER_COMMAND(40, setup);

}  // namespace
}  // namespace gpuopt::cli
