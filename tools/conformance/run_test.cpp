// One node test: load model.onnx, feed test_data_set_*/input_*.pb, compare with output_*.pb.
#include "conformance.h"
#include "backends/cpu_fast/fast_kernel.h"
#include "core/device.h"
#include "gpuopt/session.h"
#include "ir/graph.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

#include <google/protobuf/unknown_field_set.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace gpuopt::conformance {
namespace fs = std::filesystem;

std::string default_data_dir() {
  const fs::path lib = fs::path(GPUOPT_SOURCE_DIR) / ".venv" / "lib";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(lib, ec)) {
    const fs::path p = e.path() / "site-packages/onnx/backend/test/data/node";
    if (e.path().filename().string().rfind("python3", 0) == 0 && fs::is_directory(p)) return p.string();
  }
  return {};
}

std::vector<TestCase> list_tests(const std::string& data_dir) {
  std::vector<TestCase> tests;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(data_dir, ec))
    if (fs::exists(e.path() / "model.onnx")) tests.push_back({e.path().filename().string(), e.path().string()});
  std::sort(tests.begin(), tests.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return tests;
}

// Tests whose reference data needs other tolerances than ONNX's default (rtol 1e-3, atol 1e-7),
// matched by name prefix; each entry says why.
struct ToleranceOverride {
  const char* prefix;
  Tolerance tol;
  const char* why;
};
constexpr ToleranceOverride kToleranceOverrides[] = {
    {"", {1e-3, 1e-7}, "ONNX backend-test default"},
    // Imaginary parts that are exactly 0 were stored as float32 round-off (up to 1.9e-7) of
    // values of magnitude ~100; an exact DFT gives 0, so atol covers that round-off.
    {"test_dft_inverse", {1e-3, 1e-6}, "float32 round-off stored for exact zeros"},
};

Tolerance tolerance_for(const std::string& name) {
  Tolerance t;
  size_t best = 0;
  for (const auto& o : kToleranceOverrides) {
    const std::string_view p(o.prefix);
    if (name.rfind(p, 0) == 0 && p.size() >= best) {
      best = p.size();
      t = o.tol;
    }
  }
  return t;
}

Status compare(const Tensor& e, const Tensor& a, const Tolerance& tol) {
  if (e.dtype() != a.dtype())
    return Status::InvalidArgument("dtype {} expected, got {}", dtype_name(e.dtype()), dtype_name(a.dtype()));
  if (e.shape() != a.shape())
    return Status::InvalidArgument("shape {} expected, got {}", shape_to_string(e.shape()), shape_to_string(a.shape()));
  if (e.dtype() == DType::String) {
    for (int64_t i = 0; i < e.numel(); ++i)
      if (e.strings()[i] != a.strings()[i])
        return Status::InvalidArgument("element {}: '{}' expected, got '{}'", i, e.strings()[i], a.strings()[i]);
    return Status::Ok();
  }
  const bool is_float = dtype_is_float(e.dtype());
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (int64_t i = 0; i < e.numel(); ++i) {
    bool ok;
    if (!is_float) {
      ok = e.get_i64(i) == a.get_i64(i);
    } else {
      const double x = e.get_f64(i), y = a.get_f64(i);
      if (std::isnan(x) || std::isnan(y)) ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(x) || std::isinf(y)) ok = x == y;
      else {
        const double err = std::fabs(x - y);
        ok = err <= tol.atol + tol.rtol * std::fabs(x);
        if (!ok) worst = std::max(worst, err);
      }
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return Status::Ok();
  if (!is_float)
    return Status::InvalidArgument("{} of {} elements differ; first at {}: {} expected, got {}", bad, e.numel(), first,
                                   e.get_i64(first), a.get_i64(first));
  return Status::InvalidArgument("{} of {} elements differ (max abs err {:.3g}); first at {}: {:.7g} expected, got {:.7g}",
                                 bad, e.numel(), worst, first, e.get_f64(first), a.get_f64(first));
}

namespace {

std::vector<std::string> model_ops(const std::string& path) {
  std::vector<std::string> ops;
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto m;
  if (f && m.ParseFromIstream(&f))
    for (const auto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

// The imported graph's nodes with their first input's dtype and the fast CPU backend's claim.
std::vector<NodeForm> node_forms(const std::string& path) {
  std::vector<NodeForm> forms;
  auto g = load_onnx_model(path);
  if (!g.ok() || !g->infer_shapes().ok()) return forms;
  for (const Node& n : g->nodes()) {
    DType dt = DType::Undefined;
    for (ValueId v : n.inputs)
      if (v != kNoValue) {
        dt = g->value(v).info.dtype;
        break;
      }
    if (dt == DType::Undefined && !n.outputs.empty() && n.outputs[0] != kNoValue) dt = g->value(n.outputs[0]).info.dtype;
    if (dt == DType::Undefined) continue;
    forms.push_back({n.op_type.empty() ? std::string(op_name(n.op)) : n.op_type, std::string(dtype_name(dt)),
                     cpu_fast::make_fast_kernel(n, *g) != nullptr});
  }
  return forms;
}

std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!fs::exists(p)) break;
    files.push_back(p.string());
  }
  return files;
}

// Which graph inputs (not initializers) and outputs are optional-typed: their test data files
// hold an OptionalProto instead of a TensorProto.
struct OptionalIo {
  std::vector<bool> inputs, outputs;
};
OptionalIo optional_io(const std::string& path) {
  OptionalIo io;
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto m;
  if (!f || !m.ParseFromIstream(&f)) return io;
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& v : m.graph().input())
    if (!inits.count(v.name())) io.inputs.push_back(v.type().has_optional_type());
  for (const auto& v : m.graph().output()) io.outputs.push_back(v.type().has_optional_type());
  return io;
}

// An OptionalProto file (onnx-data.proto, not compiled here: read from its wire format): the
// tensor it holds (field 3), or an error for an empty optional or one of another kind.
Result<Tensor> load_optional_pb(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  google::protobuf::UnknownFieldSet fields;
  if (!f.good() && !f.eof()) return Status::NotFound("'{}' cannot be read", path);
  if (!fields.ParseFromString(bytes)) return Status::InvalidArgument("'{}' is not a serialized OptionalProto", path);
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& fld = fields.field(i);
    if (fld.number() != 3 || fld.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    onnx::TensorProto t;
    if (!t.ParseFromString(fld.length_delimited()))
      return Status::InvalidArgument("'{}': the optional's tensor is corrupt", path);
    return tensor_from_proto(t, fs::path(path).parent_path().string(), fmt::format("tensor '{}'", path));
  }
  return Status::Unimplemented("'{}' is an empty optional (or holds a sequence): gpuopt reads optional graph inputs "
                               "and outputs as the tensor they hold",
                               path);
}

Status run_data_set(const Session& s, const fs::path& ds, const Tolerance& tol, const OptionalIo& io) {
  auto load = [](const std::string& f, bool optional) { return optional ? load_optional_pb(f) : load_tensor_pb(f); };
  std::vector<Tensor> inputs;
  const std::vector<std::string> in_files = numbered(ds, "input"), out_files = numbered(ds, "output");
  for (size_t i = 0; i < in_files.size(); ++i) {
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, load(in_files[i], i < io.inputs.size() && io.inputs[i]));
    inputs.push_back(std::move(t));
  }
  std::vector<Tensor> expected;
  for (size_t i = 0; i < out_files.size(); ++i) {
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, load(out_files[i], i < io.outputs.size() && io.outputs[i]));
    expected.push_back(std::move(t));
  }
  GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, s.run_ordered(inputs));
  if (outs.size() != expected.size())
    return Status::InvalidArgument("{} outputs, the test expects {}", outs.size(), expected.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    Status st = compare(expected[i], outs[i], tol);
    if (!st.ok()) return Status::InvalidArgument("output {} '{}': {}", i, s.outputs()[i].name, st.message());
  }
  return Status::Ok();
}

}  // namespace

TestResult run_test(const TestCase& tc, const std::string& device) {
  TestResult r;
  r.name = tc.name;
  const fs::path dir(tc.dir);
  r.ops = model_ops((dir / "model.onnx").string());
  r.forms = node_forms((dir / "model.onnx").string());
  const auto t0 = std::chrono::steady_clock::now();
  Status st = [&]() -> Status {
    SessionOptions opt;
    GPUOPT_ASSIGN_OR_RETURN(opt.device, parse_device(device));
    GPUOPT_ASSIGN_OR_RETURN(auto session, Session::load((dir / "model.onnx").string(), opt));
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return Status::NotFound("no test_data_set_* folder");
    const OptionalIo io = optional_io((dir / "model.onnx").string());
    for (const auto& ds : sets) {
      Status s = run_data_set(*session, ds, tolerance_for(tc.name), io);
      if (!s.ok()) return s.with_context(ds.filename().string());
    }
    return Status::Ok();
  }();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.passed = st.ok();
  if (!st.ok()) {
    r.message = st.to_string();
    // The test folder is already in the line; drop the long model path from the message.
    const std::string loading = fmt::format("loading '{}': ", (dir / "model.onnx").string());
    if (size_t p = r.message.find(loading); p != std::string::npos) r.message.erase(p, loading.size());
  }
  std::replace(r.message.begin(), r.message.end(), '\n', ' ');
  return r;
}

// Protocol child -> parent over a pipe: "P|F <ms> <ops,comma,separated> <op:dtype:fast;...>\n<message>".
TestResult run_test_isolated(const TestCase& tc, const std::string& device, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return run_test(tc, device);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    TestResult r = run_test(tc, device);
    std::string ops;
    for (const auto& o : r.ops) ops += (ops.empty() ? "" : ",") + o;
    std::string forms;
    for (const auto& f : r.forms) forms += fmt::format("{}{}:{}:{}", forms.empty() ? "" : ";", f.op, f.dtype, f.fast ? 1 : 0);
    const std::string msg = fmt::format("{} {:.3f} {} {}\n{}", r.passed ? 'P' : 'F', r.ms, ops.empty() ? "-" : ops,
                                        forms.empty() ? "-" : forms, r.message);
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  TestResult r;
  r.name = tc.name;
  std::string buf;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    r.message = fmt::format("timed out after {} s", timeout_s);
    return r;
  }
  if (WIFSIGNALED(status)) {
    r.message = fmt::format("crashed with signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return r;
  }
  const size_t nl = buf.find('\n');
  if (buf.size() < 2 || nl == std::string::npos) {
    r.message = "child process exited without a result";
    return r;
  }
  r.passed = buf[0] == 'P';
  const std::string head = buf.substr(2, nl - 2);
  const size_t sp = head.find(' ');
  r.ms = std::atof(head.substr(0, sp).c_str());
  const std::string rest = sp == std::string::npos ? "-" : head.substr(sp + 1);
  const size_t sp2 = rest.find(' ');
  const std::string ops = rest.substr(0, sp2), forms = sp2 == std::string::npos ? "-" : rest.substr(sp2 + 1);
  auto split = [](const std::string& text, char sep) {
    std::vector<std::string> out;
    if (text == "-") return out;
    size_t start = 0;
    for (;;) {
      const size_t c = text.find(sep, start);
      out.push_back(text.substr(start, c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    return out;
  };
  r.ops = split(ops, ',');
  for (const std::string& f : split(forms, ';')) {
    const std::vector<std::string> parts = split(f, ':');
    if (parts.size() == 3) r.forms.push_back({parts[0], parts[1], parts[2] == "1"});
  }
  r.message = buf.substr(nl + 1);
  return r;
}

}  // namespace gpuopt::conformance
