#include "bench/suite.h"

#include "bench/cpu_gemm.h"
#include "bench/plots.h"
#include "core/table.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

namespace gpuopt::bench {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

void progress(const SuiteOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

std::optional<double> tera(std::optional<double> v) {
  if (v) *v /= 1e12;
  return v;
}

int repeat_or(const SuiteOptions& o, int dflt) {
  return o.repeat > 0 ? o.repeat : dflt;
}

Section skipped(Section s, const std::string& why) {
  s.skipped = why;
  return s;
}

// Records a failed row as a note; a missing device skips the whole section instead.
bool record_error(Section* s, const std::string& what, const Status& st) {
  s->notes.push_back(fmt::format("{}: {}", what, st.to_string()));
  return st.code() == StatusCode::kUnavailable;
}

Measurement rate_row(const std::string& test, const std::string& param, double x, const WorkCount& w,
                     const TimingStats& t, bool flops, double scale, const std::string& unit) {
  Measurement m;
  m.test = test;
  m.param = param;
  m.x = x;
  m.work = w;
  m.seconds = t;
  m.unit = unit;
  m.value = t.median > 0 ? (flops ? w.flops : w.bytes) / t.median / scale : 0;
  return m;
}

}  // namespace

std::vector<double> roofline_intensities() {
  std::vector<double> v;
  for (int f = 1; f <= 8192; f *= 2) v.push_back(f / static_cast<double>(kRooflineBytesPerWord));
  return v;
}

std::string intensity_label(double i) {
  if (i < 1) return fmt::format("1/{:.0f}", 1 / i);
  return fmt::format("{:.0f}", i);
}

void apply_defaults(SuiteOptions* o) {
  if (o->memory_sizes.empty())
    for (uint64_t s = kMiB; s <= 4096 * kMiB; s *= 2) o->memory_sizes.push_back(s);
  if (o->transfer_sizes.empty()) o->transfer_sizes = {kMiB, 16 * kMiB, 256 * kMiB, 1024 * kMiB};
  if (o->gemm_sizes.empty()) o->gemm_sizes = {1024, 2048, 4096, 8192, 16384};
  if (o->gemm_types.empty())
    o->gemm_types = {GemmType::F32, GemmType::TF32, GemmType::F16, GemmType::BF16, GemmType::FP8, GemmType::INT8};
  if (o->roofline_types.empty()) o->roofline_types = {RooflineType::F32, RooflineType::F16};
  if (o->cpu_sizes.empty()) o->cpu_sizes = {256, 512, 1024, 2048, 4096, 8192};
}

Result<std::vector<uint64_t>> parse_byte_sizes(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) return Status::InvalidArgument("--sizes '{}': empty item", text);
    uint64_t mult = 1;
    const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(item.back())));
    if (suffix == 'K' || suffix == 'M' || suffix == 'G') {
      mult = suffix == 'K' ? 1024 : suffix == 'M' ? kMiB : 1024 * kMiB;
      item.pop_back();
    }
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0)
      return Status::InvalidArgument("--sizes '{}': '{}' is not a size like 4096, 64K, 16M or 2G", text, item);
    out.push_back(v * mult);
  }
  return out;
}

Result<std::vector<int>> parse_ints(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > (1 << 20))
      return Status::InvalidArgument("--sizes '{}': '{}' is not a positive integer", text, item);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

GpuContext open_gpu(int device) {
  GpuContext g;
  auto d = query_device(device);
  if (!d.ok()) {
    g.why_not = d.status().code() == StatusCode::kUnavailable ? d.status().message() : d.status().to_string();
    return g;
  }
  g.device = *d;
  g.telemetry = TelemetryReader::open(d->pci_bus_id);
  return g;
}

nlohmann::json context_json(const GpuContext& g) {
  if (!g.device) return {{"name", ""}, {"available", false}, {"why", g.why_not}};
  nlohmann::json j = device_to_json(*g.device);
  j["available"] = true;
  j["nvml"] = g.telemetry.available();
  return j;
}

Section bench_memory(const SuiteOptions& o, const GpuContext& g) {
  Section s = make_section("memory", "Memory bandwidth (GB/s = 1e9 bytes/s)");
  if (!g.device) return skipped(s, g.why_not);
  const DeviceInfo& d = *g.device;
  const double theo = theoretical_bandwidth(d) / 1e9;
  s.notes.push_back(
      "byte convention: bytes read + bytes written (a copy of N bytes counts 2N; read-only and "
      "write-only kernels count N); transfers count the bytes crossing the link once");
  s.notes.push_back(
      fmt::format("theoretical DRAM bandwidth {:.0f} GB/s = memory clock {} MHz x 2 x {}-bit bus (gpu/spec_table)",
                  theo, d.mem_clock_khz / 1000, d.mem_bus_width_bits));
  s.notes.push_back(fmt::format("device-side tests rotate through {} of buffers (4 x L2) so small sizes come from DRAM",
                                format_bytes(4.0 * d.l2_bytes)));
  const int rep = repeat_or(o, 20);
  MemParams p;
  p.device = d.index;
  p.repeat = rep;
  p.rotate_bytes = 4 * static_cast<uint64_t>(d.l2_bytes);
  if (o.check) {
    const Status c = check_memory_kernels(d.index);
    s.notes.push_back(c.ok() ? "check: copy, read and write kernels agree with the CPU"
                             : "check FAILED: " + c.to_string());
  }
  const MemTest device_tests[] = {MemTest::MemcpyD2D, MemTest::CopyKernel, MemTest::CopyKernelStreaming,
                                  MemTest::ReadKernel, MemTest::WriteKernel};
  const size_t total = o.memory_sizes.size() * std::size(device_tests) + o.transfer_sizes.size() * 4;
  size_t step = 0;
  for (MemTest t : device_tests) {
    for (uint64_t bytes : o.memory_sizes) {
      progress(o, fmt::format("[memory {}/{}] {} {}", ++step, total, mem_test_name(t), format_bytes(bytes)));
      auto r = time_memory(t, bytes, p);
      if (!r.ok()) {
        if (record_error(&s, fmt::format("{} {}", mem_test_name(t), format_bytes(bytes)), r.status()))
          return skipped(s, r.status().message());
        continue;
      }
      const WorkCount w = t == MemTest::ReadKernel    ? read_count(bytes)
                          : t == MemTest::WriteKernel ? write_count(bytes)
                                                      : copy_count(bytes);
      Measurement m = rate_row(mem_test_name(t), format_bytes(bytes), bytes, w, *r, false, 1e9, "GB/s");
      m.reference = theo;
      m.reference_name = "theoretical";
      m.telemetry = g.telemetry.sample();
      s.results.push_back(m);
    }
  }
  for (MemTest t : {MemTest::H2DPinned, MemTest::D2HPinned, MemTest::H2DPageable, MemTest::D2HPageable}) {
    for (uint64_t bytes : o.transfer_sizes) {
      progress(o, fmt::format("[memory {}/{}] {} {}", ++step, total, mem_test_name(t), format_bytes(bytes)));
      MemParams tp = p;
      tp.repeat = t == MemTest::H2DPageable || t == MemTest::D2HPageable ? std::min(rep, 5) : rep;
      auto r = time_memory(t, bytes, tp);
      if (!r.ok()) {
        record_error(&s, fmt::format("{} {}", mem_test_name(t), format_bytes(bytes)), r.status());
        continue;
      }
      Measurement m =
          rate_row(mem_test_name(t), format_bytes(bytes), bytes, transfer_count(bytes), *r, false, 1e9, "GB/s");
      m.telemetry = g.telemetry.sample();
      s.results.push_back(m);
    }
  }
  // Peer to peer: device -> each other device, at the largest transfer size.
  for (int peer = 0; peer < d.device_count; ++peer) {
    if (peer == d.index) continue;
    const uint64_t bytes = o.transfer_sizes.back();
    progress(o, fmt::format("[memory] p2p {} -> {} {}", d.index, peer, format_bytes(bytes)));
    MemParams pp = p;
    pp.peer = peer;
    auto direct = can_access_peer(d.index, peer);
    auto r = time_memory(MemTest::P2P, bytes, pp);
    if (!r.ok()) {
      record_error(&s, fmt::format("p2p {} -> {}", d.index, peer), r.status());
      continue;
    }
    Measurement m = rate_row("p2p_memcpy", fmt::format("{} -> {} {}", d.index, peer, format_bytes(bytes)), bytes,
                             transfer_count(bytes), *r, false, 1e9, "GB/s");
    m.note = direct.ok() && *direct ? "direct peer access" : "staged through the host";
    m.telemetry = g.telemetry.sample();
    s.results.push_back(m);
  }
  if (d.device_count < 2) s.notes.push_back("p2p: one GPU visible, nothing to measure");
  return s;
}

Section bench_compute(const SuiteOptions& o, const GpuContext& g) {
  Section s = make_section("compute", "Compute throughput (TFLOP/s = 1e12 FLOP/s; int8 in TOP/s)");
  if (!g.device) return skipped(s, g.why_not);
  const DeviceInfo& d = *g.device;
  s.notes.push_back(
      fmt::format("spec peak = per-SM rate of compute capability {}.{} (gpu/spec_table) x {} SMs x max SM clock {} MHz",
                  d.cc_major, d.cc_minor, d.sm_count, d.sm_clock_khz / 1000));
  s.notes.push_back(
      "GEMM: C = A^T B, n x n x n, 2n^3 operations, random inputs in [-1, 1) (int8: [-64, 63]); "
      "fp8 is e4m3 in, bf16 out; int8 accumulates in int32");
  const int rep = repeat_or(o, 10);
  if (o.fma) {
    for (FmaKind k : {FmaKind::F32, FmaKind::F16x2, FmaKind::F64}) {
      progress(o, fmt::format("[compute] fma {}", fma_kind_name(k)));
      if (o.check) {
        const Status c = check_fma(k, d.index);
        s.notes.push_back(c.ok() ? fmt::format("check: fma {} agrees with the CPU", fma_kind_name(k))
                                 : "check FAILED: " + c.to_string());
      }
      auto r = time_fma(k, d.index, rep);
      if (!r.ok()) {
        if (record_error(&s, fmt::format("fma {}", fma_kind_name(k)), r.status()))
          return skipped(s, r.status().message());
        continue;
      }
      Measurement m = rate_row(fmt::format("fma_{}", fma_kind_name(k)),
                               fmt::format("{} threads x {} x {}", r->threads, r->iterations, kFmaChains), 0,
                               fma_count(k, r->threads, r->iterations), r->seconds, true, 1e12, "TFLOP/s");
      m.reference = tera(theoretical_peak(d, fma_kind_name(k)));
      m.reference_name = "spec peak";
      m.note = "CUDA cores, no tensor cores";
      m.telemetry = g.telemetry.sample();
      s.results.push_back(m);
    }
  }
  if (o.gemm) {
    const size_t total = o.gemm_types.size() * o.gemm_sizes.size();
    size_t step = 0;
    for (GemmType t : o.gemm_types) {
      if (o.check) {
        const Status c = check_gemm(t, 512, d.index);
        s.notes.push_back(c.ok() ? fmt::format("check: gemm {} n=512 agrees with CPU dot products", gemm_type_name(t))
                                 : "check: " + c.to_string());
      }
      for (int n : o.gemm_sizes) {
        ++step;
        if ((t == GemmType::F32) && o.f32_max_n > 0 && n > o.f32_max_n) continue;
        progress(o, fmt::format("[compute {}/{}] gemm {} n={}", step, total, gemm_type_name(t), n));
        auto r = time_gemm(t, n, d.index, rep, o.max_algos);
        if (!r.ok()) {
          if (record_error(&s, fmt::format("gemm {} n={}", gemm_type_name(t), n), r.status()))
            return skipped(s, r.status().message());
          if (r.status().code() == StatusCode::kUnimplemented) break;  // the type, not the size
          continue;
        }
        const bool integer = t == GemmType::INT8;
        Measurement m = rate_row(fmt::format("gemm_{}", gemm_type_name(t)), fmt::format("n={}", n), n,
                                 gemm_count(n, n, n, gemm_in_bytes(t), gemm_out_bytes(t)), r->seconds, true, 1e12,
                                 integer ? "TOP/s" : "TFLOP/s");
        m.reference = tera(theoretical_peak(d, fmt::format("gemm_{}", gemm_type_name(t))));
        m.reference_name = "spec peak";
        m.note = r->algo;
        m.telemetry = g.telemetry.sample();
        s.results.push_back(m);
      }
    }
  }
  return s;
}

Section bench_roofline(const SuiteOptions& o, const GpuContext& g) {
  Section s = make_section("roofline", "Empirical roofline (mixbench-style kernel family)");
  if (!g.device) return skipped(s, g.why_not);
  const DeviceInfo& d = *g.device;
  s.notes.push_back(fmt::format(
      "each 4-byte word (one f32 or one half2) is read once and written once (8 bytes) after f FLOPs: intensity "
      "f/8 FLOP/byte; {} words per launch ({} each way)",
      o.roofline_words, format_bytes(4.0 * o.roofline_words)));
  s.notes.push_back(
      "reference = theoretical roof: min(spec peak of the CUDA-core FMA pipe, intensity x theoretical bandwidth)");
  const int rep = repeat_or(o, 10);
  const auto intens = roofline_intensities();
  s.extra["ceilings"] = nlohmann::json::object();
  for (RooflineType t : o.roofline_types) {
    const std::string name = fmt::format("roofline_{}", roofline_type_name(t));
    std::vector<RooflinePoint> pts;
    if (o.check) {
      Status c = Status::Ok();
      for (int f : {1, 2, 4, 64}) {
        c = check_roofline(t, f, d.index);
        if (!c.ok()) break;
      }
      s.notes.push_back(c.ok() ? fmt::format("check: {} kernels agree with the CPU", name)
                               : "check FAILED: " + c.to_string());
    }
    size_t step = 0;
    for (double in : intens) {
      const int f = roofline_flops_for_intensity(in);
      progress(o, fmt::format("[roofline {}/{}] {} I={}", ++step, intens.size(), roofline_type_name(t),
                              intensity_label(in)));
      auto r = time_roofline(t, o.roofline_words, f, d.index, rep);
      if (!r.ok()) {
        if (record_error(&s, fmt::format("{} I={}", name, intensity_label(in)), r.status()))
          return skipped(s, r.status().message());
        continue;
      }
      const WorkCount w = roofline_count(t, o.roofline_words, f);
      Measurement m = rate_row(name, "I=" + intensity_label(in), in, w, *r, true, 1e12, "TFLOP/s");
      const auto peak = theoretical_peak(d, t == RooflineType::F32 ? "f32" : "f16x2");
      if (peak) m.reference = std::min(*peak, in * theoretical_bandwidth(d)) / 1e12;
      m.reference_name = "theoretical roof";
      m.note = fmt::format("{:.0f} GB/s", w.bytes / r->median / 1e9);
      m.telemetry = g.telemetry.sample();
      pts.push_back({in, m.value * 1e12});
      s.results.push_back(m);
    }
    const RooflineCeilings c = fit_roofline(pts);
    s.extra["ceilings"][name] = {
        {"bandwidth_GBps", c.bandwidth / 1e9}, {"peak_GFLOPs", c.peak / 1e9}, {"ridge_flop_per_byte", c.ridge()}};
    s.notes.push_back(fmt::format("{}: measured ceilings {:.0f} GB/s and {:.2f} TFLOP/s, ridge at {:.1f} FLOP/byte",
                                  name, c.bandwidth / 1e9, c.peak / 1e12, c.ridge()));
  }
  return s;
}

Section bench_latency(const SuiteOptions& o, const GpuContext& g) {
  Section s = make_section("latency", "Latency (microseconds, median)");
  if (!g.device) return skipped(s, g.why_not);
  progress(o, "[latency] launches, events, allocation, graphs");
  auto r = run_latency(g.device->index, repeat_or(o, 50));
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kUnavailable) return skipped(s, r.status().message());
    s.notes.push_back("latency: " + r.status().to_string());
    return s;
  }
  for (const auto& e : *r) {
    Measurement m;
    m.test = e.test;
    m.param = e.param;
    m.seconds = e.seconds;
    m.unit = "us";
    m.value = e.seconds.median * 1e6;
    m.note = e.note;
    m.telemetry = g.telemetry.sample();
    s.results.push_back(m);
  }
  return s;
}

Section bench_cpu_vs_gpu(const SuiteOptions& o, const GpuContext& g) {
  Section s = make_section("cpu_vs_gpu", "Matrix multiply, CPU (OpenBLAS sgemm) vs GPU (cuBLASLt f32)");
  auto blas = cpu_blas_description();
  s.notes.push_back("CPU: " + (blas.ok() ? *blas : blas.status().message()));
  s.notes.push_back(g.device ? "GPU: " + g.device->name + ", strict f32 (no tf32), same problem"
                             : "GPU: skipped: " + g.why_not);
  const int rep = repeat_or(o, 3);
  std::vector<double> cpu_t, gpu_t, gpu_tx;
  std::vector<int> ns;
  for (int n : o.cpu_sizes) {
    progress(o, fmt::format("[cpu-vs-gpu] n={}", n));
    const WorkCount w = gemm_count(n, n, n, 4, 4);
    double ct = NAN, gt = NAN, gx = NAN;
    if (blas.ok()) {
      auto r = time_cpu_sgemm(n, n >= 4096 ? std::min(rep, 2) : rep);
      if (r.ok()) {
        Measurement m = rate_row("cpu_openblas_sgemm", fmt::format("n={}", n), n, w, *r, true, 1e9, "GFLOP/s");
        s.results.push_back(m);
        ct = r->median;
      } else {
        record_error(&s, fmt::format("cpu n={}", n), r.status());
      }
    }
    if (g.device && n % 16 == 0) {
      auto r = time_gemm(GemmType::F32, n, g.device->index, std::max(rep, 5), 2);
      if (r.ok()) {
        Measurement m = rate_row("gpu_cublaslt_sgemm", fmt::format("n={}", n), n, w, r->seconds, true, 1e9, "GFLOP/s");
        m.note = r->algo;
        m.telemetry = g.telemetry.sample();
        gt = r->seconds.median;
        // Plus moving A and B in and C out over pinned memory: what an offload really costs.
        MemParams p;
        p.device = g.device->index;
        p.repeat = 5;
        const uint64_t nn4 = static_cast<uint64_t>(n) * n * 4;
        auto h2d = time_memory(MemTest::H2DPinned, 2 * nn4, p);
        auto d2h = time_memory(MemTest::D2HPinned, nn4, p);
        if (!std::isnan(ct)) m.note += fmt::format("; {:.1f}x faster than the CPU", ct / gt);
        s.results.push_back(m);
        if (h2d.ok() && d2h.ok()) {
          TimingStats tx = r->seconds;
          tx.median += h2d->median + d2h->median;
          tx.min += h2d->min + d2h->min;
          tx.max += h2d->max + d2h->max;
          Measurement mx = rate_row("gpu_sgemm_with_transfers", fmt::format("n={}", n), n, w, tx, true, 1e9, "GFLOP/s");
          mx.note = "GEMM + H2D of A, B + D2H of C (pinned)";
          if (!std::isnan(ct)) mx.note += fmt::format("; {:.1f}x vs CPU", ct / tx.median);
          gx = tx.median;
          s.results.push_back(mx);
        }
      } else if (r.status().code() != StatusCode::kUnavailable) {
        record_error(&s, fmt::format("gpu n={}", n), r.status());
      }
    }
    ns.push_back(n);
    cpu_t.push_back(std::isnan(ct) ? INFINITY : ct);
    gpu_t.push_back(std::isnan(gt) ? INFINITY : gt);
    gpu_tx.push_back(std::isnan(gx) ? INFINITY : gx);
  }
  auto crossover = [&](const std::vector<double>& gpu) -> nlohmann::json {
    const int i = crossover_index(cpu_t, gpu);
    return i >= 0 && std::isfinite(gpu[i]) ? nlohmann::json(ns[i]) : nlohmann::json(nullptr);
  };
  s.extra["gpu_wins_from_n"] = crossover(gpu_t);
  s.extra["gpu_with_transfers_wins_from_n"] = crossover(gpu_tx);
  if (g.device) {
    const auto& a = s.extra["gpu_wins_from_n"];
    const auto& b = s.extra["gpu_with_transfers_wins_from_n"];
    s.notes.push_back(fmt::format("GPU faster from n = {} (compute only), n = {} (with transfers)",
                                  a.is_null() ? "never in this range" : a.dump(),
                                  b.is_null() ? "never in this range" : b.dump()));
  }
  return s;
}

}  // namespace gpuopt::bench
