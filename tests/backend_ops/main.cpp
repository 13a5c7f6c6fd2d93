// backend_ops: each case runs one op on the CPU reference and on the CUDA backend's kernel, on
// fresh random inputs, and checks: no NaN where the reference has none, Inf matches Inf of the
// same sign, guard bytes around every output untouched, error within the dtype's tolerance.
//
//   backend_ops test [--op Softmax]      correctness, ends with "N passed, N failed, N skipped"
//   backend_ops perf [--op MatMul]       GB/s and TFLOP/s per case (50 runs replayed as one
//                                        CUDA graph when the op allows capture: kernel time,
//                                        not launch overhead; "loop" in the table otherwise)
//   ... [--case TEXT]                    only the cases whose label contains TEXT
//                                        (e.g. `perf --case perf`: the BERT-size cases);
//                                        `--case '!TEXT'`: only those whose label does not
//   backend_ops test --reference-only 1  runs only each case's CPU reference: checks that new
//                                        cases are valid on a machine without a GPU
//   backend_ops support [--out FILE]     op x dtype support table (Markdown)
//   backend_ops support --list FILE      the same as "Op: dtype dtype ..." lines: the checked-in
//                                        tests/backend_ops/cuda_support.txt, from which
//                                        `gpuopt_conformance --ops-table` fills docs/ops.md's CUDA
//                                        column (CTest backend_ops.support_list checks it is current)
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "cases.h"
#include "core/dispatch.h"
#include "core/table.h"
#include "gpuopt/kernel_settings.h"
#include "ir/eval.h"
#include "ops/quant/fp8_e4m3.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

namespace gpuopt::backend_ops {
namespace {

using cuda::CudaKernelContext;
using cuda::CudaOpEntry;
using cuda::ExecContext;
using cuda::cuda_op;

constexpr size_t kGuard = 256;
constexpr unsigned char kPattern = 0xA5;

struct Tol {
  double abs, rel;
};
// ONNX Runtime's per-dtype tolerances (CONVENTIONS.md).
Tol tolerance(DType dt) {
  switch (dt) {
    case DType::F16: return {2.5e-3, 1e-3};
    case DType::BF16: return {2e-2, 1e-2};
    case DType::F32: return {1e-5, 1e-4};
    case DType::F64: return {1e-10, 1e-9};
    default: return {0, 0};  // integers and bool: exact
  }
}

struct DeviceBuf {
  void* base = nullptr;
  size_t bytes = 0;
  explicit DeviceBuf(size_t n) : bytes(n) {
    cudaMalloc(&base, n + 2 * kGuard);
    cudaMemset(base, kPattern, n + 2 * kGuard);
  }
  ~DeviceBuf() { cudaFree(base); }
  void* data() const { return static_cast<char*>(base) + kGuard; }
  bool guards_ok() const {
    std::vector<unsigned char> h(bytes + 2 * kGuard);
    cudaMemcpy(h.data(), base, h.size(), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kGuard; ++i)
      if (h[i] != kPattern || h[kGuard + bytes + i] != kPattern) return false;
    return true;
  }
};

Tensor make_input(const InputSpec& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(s.dtype, s.shape);
  if (s.host_constant) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype_is_integer(s.dtype)) {
        dispatch_dtype(s.dtype, [&](auto tag) {
          using T = decltype(tag);
          t.data<T>()[i] = static_cast<T>(static_cast<int64_t>(s.values[static_cast<size_t>(i)]));
        });
      } else {
        t.set_f64(i, s.values[static_cast<size_t>(i)]);
      }
    }
    return t;
  }
  std::uniform_real_distribution<double> u(s.lo, s.hi), zero(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (s.dtype == DType::Bool) v = v > 0 ? 1 : 0;
    else if (dtype_is_integer(s.dtype)) v = std::floor(v);
    else if (std::fabs(v) < 1e-3) v = 0.5;  // never zeros, unless asked for
    if (s.zero_fraction > 0 && zero(rng) < s.zero_fraction) v = 0;
    t.set_f64(i, v);
  }
  return t;
}

struct Outcome {
  enum Kind { kPass, kFail, kSkip } kind = kSkip;
  std::string detail;
  double gbps = 0, tflops = 0, us = 0;
  const char* timing = "";  // perf: "graph" or "loop"
};

struct Harness {
  ExecContext ec;
  // The kernel choices the cases run under: the environment's (GPUOPT_POOL_KERNEL=cudnn,
  // GPUOPT_DEPTHWISE_KERNEL=smem, ... select the paths an A/B run checks), as a session's defaults.
  KernelSettings settings;
  // A pool as a Session's context has, for the ops that take scratch beyond the workspace.
  std::unique_ptr<cuda::DeviceMemory> memory;
  bool ok = false;
  bool reference_only = false;  // --reference-only: check the cases themselves, no GPU needed
  Harness() {
    auto ks = KernelSettings::from_env();
    if (!ks.ok()) {
      fmt::print(stderr, "backend_ops: {}\n", ks.status().message());
      std::exit(2);
    }
    settings = *ks;
    ec.settings = &settings;
    int n = 0;
    ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    if (!ok) return;
    cudaStreamCreate(&ec.stream);
    cublasLtCreate(&ec.lt);
    ec.workspace_bytes = size_t{64} << 20;
    cudaMalloc(&ec.workspace, ec.workspace_bytes);
    if (auto m = cuda::DeviceMemory::create(0, size_t{8} << 30); m.ok()) {
      memory = std::move(m.value());
      ec.memory = memory.get();
    }
  }
  ~Harness() {
    if (!ok) return;
    if (ec.dnn) {
      // cudnnDestroy lives in the backend's library; the process exit releases it.
    }
    cudaStreamSynchronize(ec.stream);
    ec.memory = nullptr;
    memory.reset();  // before its stream
    cublasLtDestroy(ec.lt);
    cudaFree(ec.workspace);
    cudaStreamDestroy(ec.stream);
  }

  Outcome run(const Case& c, bool perf, uint32_t seed) {
    Outcome r;
    const std::optional<Op> op = op_from_name(c.op);
    if (!op) return {Outcome::kSkip, "unsupported: not in the op table"};
    Node node;
    node.op = *op;
    node.op_type = c.op;
    node.name = c.op + "_case";
    node.attrs = c.attrs;
    std::vector<DType> dts;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      node.inputs.push_back(c.inputs[i].dtype == DType::Undefined ? kNoValue : static_cast<ValueId>(i));
      dts.push_back(c.inputs[i].dtype);
    }
    for (int o = 0; o < c.num_outputs; ++o) node.outputs.push_back(static_cast<ValueId>(c.inputs.size() + o));
    const CudaOpEntry* e = cuda_op(*op, c.opset);
    if (!e) return {Outcome::kSkip, "unsupported: no CUDA kernel"};
    if (e->supports && !e->supports(node, dts)) return {Outcome::kSkip, "unsupported: the CUDA kernel declines it (dtype, input count or attributes): CPU fallback"};
    if (!ok && !reference_only) return {Outcome::kSkip, "skipped: no CUDA device"};

    std::mt19937 rng(seed);
    std::vector<Tensor> host(c.inputs.size());
    std::vector<const Tensor*> host_ptrs(c.inputs.size(), nullptr);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.inputs[i].dtype == DType::Undefined) continue;
      host[i] = make_input(c.inputs[i], rng);
      host_ptrs[i] = &host[i];
    }
    auto ref = eval_node(node, host_ptrs, c.opset);
    if (!ref.ok()) return {Outcome::kFail, "cpu reference failed: " + ref.status().to_string()};
    if (reference_only) return {Outcome::kPass, "cpu reference ran (no CUDA run asked)"};

    std::vector<std::unique_ptr<DeviceBuf>> bufs;
    std::vector<Tensor> dev_in(c.inputs.size());
    CudaKernelContext k{node, std::vector<const Tensor*>(c.inputs.size(), nullptr), host_ptrs, {}, ec};
    double bytes = 0;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (!host_ptrs[i] || ((e->host_inputs >> i) & 1u)) continue;
      bufs.push_back(std::make_unique<DeviceBuf>(host[i].nbytes()));
      cudaMemcpy(bufs.back()->data(), host[i].raw(), host[i].nbytes(), cudaMemcpyHostToDevice);
      dev_in[i] = Tensor::borrow(host[i].dtype(), host[i].shape(), bufs.back()->data(), Device{DeviceKind::kCuda, 0});
      k.inputs[i] = &dev_in[i];
      bytes += static_cast<double>(host[i].nbytes());
    }
    std::vector<Tensor> dev_out(ref->size());
    std::vector<DeviceBuf*> out_bufs(ref->size(), nullptr);
    k.outputs.assign(ref->size(), nullptr);
    for (size_t o = 0; o < ref->size(); ++o) {
      const Tensor& t = (*ref)[o];
      if (!t.defined()) continue;
      if (e->alias) {
        dev_out[o] = Tensor::wrap(t.dtype(), t.shape(), nullptr);
      } else {
        bufs.push_back(std::make_unique<DeviceBuf>(t.nbytes()));
        out_bufs[o] = bufs.back().get();
        dev_out[o] = Tensor::borrow(t.dtype(), t.shape(), out_bufs[o]->data(), Device{DeviceKind::kCuda, 0});
      }
      k.outputs[o] = &dev_out[o];
      bytes += static_cast<double>(t.nbytes());
    }
    Status st = e->run(k);
    if (!st.ok()) return {Outcome::kFail, "cuda kernel failed: " + st.to_string()};
    if (cudaStreamSynchronize(ec.stream) != cudaSuccess) return {Outcome::kFail, std::string("cuda error: ") + cudaGetErrorString(cudaGetLastError())};

    double worst = 0;
    for (size_t o = 0; o < ref->size(); ++o) {
      const Tensor& want = (*ref)[o];
      if (!want.defined()) continue;
      if (dev_out[o].shape() != want.shape()) return {Outcome::kFail, fmt::format("output {} shape {} != {}", o, shape_to_string(dev_out[o].shape()), shape_to_string(want.shape()))};
      if (out_bufs[o] && !out_bufs[o]->guards_ok()) return {Outcome::kFail, fmt::format("output {}: guard bytes overwritten", o)};
      Tensor got = Tensor::empty(want.dtype(), want.shape());
      cudaMemcpy(got.raw(), dev_out[o].raw(), got.nbytes(), cudaMemcpyDeviceToHost);
      Tol tol = tolerance(want.dtype());
      if (dtype_is_integer(want.dtype())) tol.abs = c.int_steps;
      const bool e4m3 = c.e4m3_codes && want.dtype() == DType::U8;
      if (e4m3) {
        // One step (3 mantissa bits) of |want|, or 1/64 of the output's largest value: the GEMM's
        // own rounding (fp8 inputs, another summation order) is absolute at the output's scale, so
        // a value near 0 may land several e4m3 steps (tiny there) from the reference's.
        double top = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          top = std::max(top, std::fabs(static_cast<double>(fp8::e4m3_to_f32(static_cast<uint8_t>(want.get_f64(i))))));
        tol = {top / 64, 0.125};
      }
      for (int64_t i = 0; i < want.numel(); ++i) {
        double w = want.get_f64(i), g = got.get_f64(i);
        if (e4m3) {
          w = fp8::e4m3_to_f32(static_cast<uint8_t>(w));
          g = fp8::e4m3_to_f32(static_cast<uint8_t>(g));
        }
        if (std::isnan(w) || std::isnan(g)) {
          if (std::isnan(w) != std::isnan(g)) return {Outcome::kFail, fmt::format("output {}[{}]: got {} want {}", o, i, g, w)};
          continue;
        }
        if (std::isinf(w) || std::isinf(g)) {
          if (w != g) return {Outcome::kFail, fmt::format("output {}[{}]: got {} want {}", o, i, g, w)};
          continue;
        }
        const double err = std::fabs(g - w);
        if (err > tol.abs + tol.rel * std::fabs(w))
          return {Outcome::kFail, fmt::format("output {}[{}]: got {:.7g} want {:.7g} (err {:.3g}, tol {}+{}*|want|)", o, i, g, w, err, tol.abs, tol.rel)};
        worst = std::max(worst, err / (tol.abs + tol.rel * std::fabs(w)));
      }
    }
    r.kind = Outcome::kPass;
    r.detail = fmt::format("worst err {:.0f}% of tolerance", worst * 100);
    if (perf) {
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      for (int i = 0; i < 3; ++i) (void)e->run(k);
      const int iters = 50;
      // One CUDA graph of the 50 runs where the op can be captured: the events then time the
      // kernels, not the host's launch overhead (a few us per launch, as long as a 6 MB
      // elementwise kernel at full bandwidth).
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      bool captured = false;
      if (cudaStreamSynchronize(ec.stream) == cudaSuccess &&
          cudaStreamBeginCapture(ec.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        bool ok = true;
        for (int i = 0; i < iters && ok; ++i) ok = e->run(k).ok();
        const cudaError_t end = cudaStreamEndCapture(ec.stream, &graph);
        captured = ok && end == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
        cudaGetLastError();  // a refused capture leaves an error behind; the loop below times it instead
      }
      if (captured) {
        cudaGraphLaunch(exec, ec.stream);  // warm-up of the graph itself
        cudaEventRecord(a, ec.stream);
        cudaGraphLaunch(exec, ec.stream);
        cudaEventRecord(b, ec.stream);
      } else {
        cudaEventRecord(a, ec.stream);
        for (int i = 0; i < iters; ++i) (void)e->run(k);
        cudaEventRecord(b, ec.stream);
      }
      cudaEventSynchronize(b);
      r.timing = captured ? "graph" : "loop";
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      r.us = ms * 1000.0 / iters;
      r.gbps = bytes / (r.us * 1e-6) / 1e9;
      std::vector<ValueInfo> vin(c.inputs.size()), vout(ref->size());
      FlopsContext fc{node, {}, {}};
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (!host_ptrs[i]) { fc.inputs.push_back(nullptr); continue; }
        vin[i] = ValueInfo{host[i].dtype(), true, host[i].shape(), &host[i]};
        fc.inputs.push_back(&vin[i]);
      }
      for (size_t o = 0; o < ref->size(); ++o) {
        vout[o] = ValueInfo{(*ref)[o].dtype(), true, (*ref)[o].shape(), nullptr};
        fc.outputs.push_back(&vout[o]);
      }
      r.tflops = op_def(*op).flops(fc) / (r.us * 1e-6) / 1e12;
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
    return r;
  }
};

// Every CUDA kernel (GPUOPT_CUDA_OP, and each range of GPUOPT_CUDA_OP_RANGE) has at least one
// case here at an opset inside its range, so `test` compares it with the CPU reference; a kernel
// added without a case fails CTest backend_ops.coverage. The registry is static, so no GPU is
// needed.
int coverage() {
  std::map<std::string, std::vector<int>> case_opsets;
  for (const Case& c : all_cases()) case_opsets[c.op].push_back(c.opset);
  std::vector<std::string> missing;
  int registered = 0, ranges = 0;
  for (size_t i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    const std::vector<CudaOpEntry> entries = cuda::cuda_op_ranges(op);
    if (entries.empty()) continue;
    ++registered;
    const std::string name(op_name(op));
    for (const CudaOpEntry& e : entries) {
      ++ranges;
      bool covered = false;
      for (int opset : case_opsets[name]) covered = covered || (opset >= e.since && opset <= e.until);
      if (covered) continue;
      missing.push_back(entries.size() == 1 ? name
                                            : e.until == kOpsetMax ? fmt::format("{} (opsets {}+)", name, e.since)
                                                                   : fmt::format("{} (opsets {}-{})", name, e.since, e.until));
    }
  }
  if (!missing.empty()) {
    fmt::print(stderr, "backend_ops: {} of {} CUDA kernels have no case in tests/backend_ops/cases*.cpp: {}\n",
               missing.size(), ranges, fmt::join(missing, ", "));
    return 1;
  }
  fmt::print("all {} CUDA ops ({} kernels by opset range) have backend-ops cases\n", registered, ranges);
  return 0;
}

int main_impl(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "test";
  std::string only, out_path, list_path, label_part;
  bool reference_only = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--op")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--out")) out_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--list")) list_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--case")) label_part = argv[i + 1];
    else if (!std::strcmp(argv[i], "--reference-only")) reference_only = std::strcmp(argv[i + 1], "0") != 0;
  }
  if (mode != "test" && mode != "perf" && mode != "support" && mode != "coverage") {
    fmt::print(stderr, "usage: backend_ops test|perf|support|coverage [--op NAME] [--case TEXT] [--reference-only 1] [--out FILE] [--list FILE]\n");
    return 2;
  }
  if (mode == "coverage") return coverage();
  Harness h;
  h.reference_only = reference_only && mode == "test";
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, std::map<std::string, std::string>> support;  // op -> dtype -> mark
  std::set<std::string> dtypes_seen;
  Table perf_table({"op", "case", "us", "GB/s", "TFLOP/s", "timing"});
  uint32_t seed = static_cast<uint32_t>(std::random_device{}());
  for (const Case& c : all_cases()) {
    if (!only.empty() && c.op != only) continue;
    if (!label_part.empty()) {
      const bool negate = label_part[0] == '!';
      const bool has = c.label.find(negate ? label_part.substr(1) : label_part) != std::string::npos;
      if (has == negate) continue;
    }
    Outcome o = h.run(c, mode == "perf", seed++);
    const std::string dt = c.inputs.empty() ? "-" : std::string(dtype_name(c.inputs[0].dtype));
    dtypes_seen.insert(dt);
    std::string& mark = support[c.op][dt];
    if (mode == "support") {
      const bool unsupported = o.detail.rfind("unsupported", 0) == 0;
      const std::string now = unsupported ? "no" : "yes";
      mark = mark.empty() || mark == now ? now : "partial";  // some cases of this dtype fall back
      continue;
    }
    const char* tag = o.kind == Outcome::kPass ? "OK" : o.kind == Outcome::kFail ? "FAIL" : "SKIP";
    fmt::print("{:<20} {:<40} {:<5} {}\n", c.op, c.label, tag, o.detail);
    (o.kind == Outcome::kPass ? passed : o.kind == Outcome::kFail ? failed : skipped)++;
    if (mode == "perf" && o.kind == Outcome::kPass)
      perf_table.add({c.op, c.label, fmt::format("{:.1f}", o.us), fmt::format("{:.1f}", o.gbps), fmt::format("{:.3f}", o.tflops), o.timing});
  }
  if (mode == "support") {
    std::string md = "| op | " + fmt::format("{}", fmt::join(dtypes_seen, " | ")) + " |\n|---|";
    for (size_t i = 0; i < dtypes_seen.size(); ++i) md += "---|";
    md += "\n";
    for (const auto& [op, m] : support) {
      md += "| " + op + " |";
      for (const auto& d : dtypes_seen) md += " " + (m.count(d) ? m.at(d) : std::string("")) + " |";
      md += "\n";
    }
    if (!out_path.empty()) std::ofstream(out_path) << md;
    if (!list_path.empty()) {
      std::ofstream f(list_path);
      f << "# dtypes each op's CUDA kernel takes among the backend_ops cases (the rest falls back to the\n"
           "# CPU; * = some of that dtype's cases fall back); generated by `backend_ops support --list FILE`,\n"
           "# do not edit by hand.\n";
      for (const auto& [op, m] : support) {
        std::string dts;
        for (const auto& [d, mark] : m)
          if (mark != "no") dts += (dts.empty() ? "" : " ") + d + (mark == "partial" ? "*" : "");
        f << op << ": " << (dts.empty() ? "-" : dts) << "\n";
      }
      if (!f) {
        fmt::print(stderr, "backend_ops: cannot write '{}'\n", list_path);
        return 1;
      }
    } else {
      fmt::print("{}", md);
    }
    return 0;
  }
  if (mode == "perf") fmt::print("\n{}", perf_table.render());
  fmt::print("{} passed, {} failed, {} skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace gpuopt::backend_ops

int main(int argc, char** argv) { return gpuopt::backend_ops::main_impl(argc, argv); }
