// Repository: scanning, loading (config, versions, instances, warm-up, batcher) and lookups.
#include "server/repository.h"
#include "server/openai/llm_models.h"
#include "net/http.h"
#include "server/request_body.h"

#include "server/placement.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "core/dispatch.h"
#include "core/log.h"

namespace gpuopt::server {

namespace fs = std::filesystem;

namespace {

// An operator's file read with its size known first: it must be a regular file (a FIFO would
// hang the start, a link to /dev/zero would grow without end) of at most `max_bytes`. Opened
// non-blocking and checked on the descriptor, so what is checked is what is read.
Result<std::string> read_text(const fs::path& p, size_t max_bytes) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot read '{}': {}", p.string(), std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::NotFound("cannot read '{}': {}", p.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument("'{}' is not a regular file (a FIFO, device or socket?)", p.string());
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status::InvalidArgument("'{}' is {} bytes, over the limit of {} bytes", p.string(), st.st_size, max_bytes);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t have = 0;
  while (have < out.size()) {  // a file that grows meanwhile is read to its size at fstat
    const ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::InvalidArgument("reading '{}' failed: {}", p.string(), std::strerror(errno));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return out;
}

// A version folder is a decimal number that fits in int64; `overflow` tells a folder of digits
// that does not (the caller logs it rather than skipping it silently).
bool is_version_dir(const fs::directory_entry& e, int64_t* v, bool* overflow = nullptr) {
  std::error_code ec;
  if (!e.is_directory(ec)) return false;
  std::string n = e.path().filename().string();
  if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit)) return false;
  auto [end, err] = std::from_chars(n.data(), n.data() + n.size(), *v);
  if (err != std::errc() || end != n.data() + n.size()) {
    if (overflow) *overflow = true;
    return false;
  }
  return true;
}

Result<Tensor> warmup_tensor(const fs::path& model_dir, const std::string& input, const WarmupInput& w, int64_t batch,
                             bool batching) {
  Shape shape = w.dims;
  if (batching) shape.insert(shape.begin(), batch);
  Tensor t = Tensor::empty(w.dtype, shape);
  if (w.source == WarmupInput::Source::kFile) {
    GPUOPT_ASSIGN_OR_RETURN(std::string bytes, read_text(model_dir / "warmup" / w.file, kMaxWarmupFileBytes));
    if (w.dtype == DType::String)
      return Status::Unimplemented("warm-up input '{}': BYTES data files are not supported", input);
    // Triton repeats the file's content for each batch row.
    size_t row = t.nbytes() / static_cast<size_t>(batching ? std::max<int64_t>(batch, 1) : 1);
    if (bytes.size() != row)
      return Status::InvalidArgument("warm-up input '{}': file '{}' has {} bytes, one batch row needs {}", input,
                                     w.file, bytes.size(), row);
    for (size_t off = 0; off + row <= t.nbytes(); off += row)
      std::memcpy(static_cast<char*>(t.raw()) + off, bytes.data(), row);
    return t;
  }
  if (w.dtype == DType::String) {
    for (auto& s : t.strings()) s = w.source == WarmupInput::Source::kRandom ? "warmup" : "";
    return t;
  }
  if (w.source == WarmupInput::Source::kZero) {
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    return t;
  }
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dtype_is_float(w.dtype) ? dist(rng) : double(rng() % 2));
  return t;
}

}  // namespace

Repository::Repository(RepositoryOptions options) : opt_(std::move(options)) {
  std::error_code ec;
  single_file_ = fs::is_regular_file(opt_.path, ec);
}

Repository::~Repository() {
  stop_all();
}

std::vector<std::string> Repository::scan() const {
  std::vector<std::string> out;
  if (single_file_) {
    out.push_back(fs::path(opt_.path).stem().string());
    return out;
  }
  std::error_code ec;
  std::vector<std::string> roots{opt_.path};
  roots.insert(roots.end(), opt_.extra_paths.begin(), opt_.extra_paths.end());
  for (const auto& root : roots)
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (!e.is_directory() || e.path().filename().string().starts_with(".")) continue;
      if (!net::valid_utf8(e.path().filename().string())) {
        // Names travel in JSON and protobuf strings, which must be UTF-8: such a folder cannot be
        // served (or listed) and is skipped, with a line saying so.
        static std::mutex warned_mu;
        static std::set<std::string> warned;  // once per folder, not at every index request
        std::lock_guard<std::mutex> lk(warned_mu);
        if (warned.insert(e.path().string()).second)
          GPUOPT_LOG(warn, "repository: model folder '{}' is skipped: its name is not valid UTF-8",
                     net::printable(e.path().filename().string()));
        continue;
      }
      bool has = fs::exists(e.path() / "config.pbtxt");
      int64_t v;
      for (const auto& sub : fs::directory_iterator(e.path(), ec)) has |= is_version_dir(sub, &v);
      // A language model's folder (config.pbtxt optional) is served by the generation engine.
      if (has && !openai::is_llm_model_dir(e.path())) out.push_back(e.path().filename().string());
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status Repository::duplicates() const {
  if (single_file_ || opt_.extra_paths.empty()) return Status::Ok();
  std::vector<std::string> roots{opt_.path};
  roots.insert(roots.end(), opt_.extra_paths.begin(), opt_.extra_paths.end());
  std::error_code ec;
  for (const auto& name : scan()) {
    std::vector<std::string> where;
    for (const auto& root : roots)
      if (fs::is_directory(fs::path(root) / name, ec)) where.push_back((fs::path(root) / name).string());
    if (where.size() > 1)
      return Status::AlreadyExists("model '{}' is in two repositories: '{}' and '{}'", name, where[0], where[1]);
  }
  return Status::Ok();
}

std::string Repository::model_dir(const std::string& name) const {
  if (single_file_) return fs::path(opt_.path).parent_path().string();
  std::error_code ec;
  if (fs::is_directory(fs::path(opt_.path) / name, ec)) return (fs::path(opt_.path) / name).string();
  for (const auto& root : opt_.extra_paths)
    if (fs::is_directory(fs::path(root) / name, ec)) return (fs::path(root) / name).string();
  return "";
}

void Repository::set_state(const std::string& name, const std::string& state, const std::string& reason) {
  std::unique_lock<std::shared_mutex> lk(mu_);
  auto& e = models_[name];
  e.state = state;
  e.reason = reason;
}

Status Repository::warm_up(LoadedVersion& v, std::vector<std::unique_ptr<ModelInstance>>& instances) {
  fs::path model_dir = this->model_dir(v.name);
  for (const Warmup& w : v.config.warmups) {
    std::vector<Tensor> inputs;
    for (const IoSpec& in : v.model_inputs) {
      auto it = w.inputs.find(in.name);
      if (it == w.inputs.end())
        return Status::InvalidArgument("model '{}': warm-up '{}' gives no data for input '{}'", v.name, w.name,
                                       in.name);
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, warmup_tensor(model_dir, in.name, it->second,
                                                      std::max<int64_t>(w.batch_size, 1), v.config.max_batch_size > 0));
      inputs.push_back(std::move(t));
    }
    for (auto& inst : instances)
      for (int i = 0; i < std::max(1, w.count); ++i) {
        auto r = inst->run(inputs);
        if (!r.ok()) return r.status().with_context(fmt::format("model '{}': warm-up '{}'", v.name, w.name));
      }
  }
  return Status::Ok();
}

Status Repository::warm_up_largest_batch(LoadedVersion& v, std::vector<std::unique_ptr<ModelInstance>>& instances,
                                         const std::vector<bool>& gpu_instance) {
  // Without a model_warmup in the config, each GPU instance runs the largest batch once on zeros
  // before the model turns ready: the device pool then holds every buffer the largest batch needs
  // (no cudaMalloc on the first real request) and cuDNN/cuBLASLt have chosen their algorithms.
  // CPU instances are left alone (the reference backend allocates per run and a large batch can
  // take seconds there), as are models with a variable non-batch dim (no single largest shape).
  if (!v.config.warmups.empty() || std::find(gpu_instance.begin(), gpu_instance.end(), true) == gpu_instance.end())
    return Status::Ok();
  const int64_t batch = std::max<int64_t>(v.config.max_batch_size, 1);
  std::vector<Tensor> inputs;
  for (const IoSpec& in : v.model_inputs) {
    const TensorConfig* tc = nullptr;
    for (const auto& t : v.config.inputs)
      if (t.name == in.name) tc = &t;
    if (!tc || tc->dtype == DType::String) return Status::Ok();
    Shape shape = tc->reshape ? *tc->reshape : tc->dims;
    for (int64_t d : shape)
      if (d < 0) {
        GPUOPT_LOG(info, "model '{}': input '{}' has a variable dim; no largest-batch warm-up", v.name, in.name);
        return Status::Ok();
      }
    if (v.config.max_batch_size > 0) shape.insert(shape.begin(), batch);
    inputs.push_back(Tensor::zeros(tc->dtype, shape));
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!gpu_instance[i]) continue;
    auto r = instances[i]->run(inputs);
    if (!r.ok())
      return r.status().with_context(fmt::format("model '{}': warm-up at the largest batch ({})", v.name, batch));
  }
  GPUOPT_LOG(info, "model '{}': GPU instances warmed up at batch {}", v.name, batch);
  return Status::Ok();
}

Result<std::map<int64_t, std::shared_ptr<LoadedVersion>>> Repository::load_versions(const std::string& name) {
  ModelConfig base;
  bool had_config = false;
  std::map<int64_t, std::string> paths;
  if (single_file_) {
    if (name != fs::path(opt_.path).stem().string()) return Status::NotFound("unknown model '{}'", name);
    paths[1] = opt_.path;
  } else {
    std::error_code ec;
    if (name.empty() || name.find('/') != std::string::npos || name == ".." || name == "." || model_dir(name).empty())
      return Status::NotFound("model '{}' is not in the repository '{}'", net::printable(name), opt_.path);
    fs::path dir = model_dir(name);
    fs::path cfg = dir / "config.pbtxt";
    if (fs::exists(cfg, ec)) {
      GPUOPT_ASSIGN_OR_RETURN(std::string text, read_text(cfg, kMaxConfigBytes));
      GPUOPT_ASSIGN_OR_RETURN(base, parse_model_config(text, name + "/config.pbtxt"));
      had_config = true;
      if (opt_.strict_config && (base.inputs.empty() || base.outputs.empty()))
        return Status::InvalidArgument("{}/config.pbtxt lists no {} (--strict-model-config=true needs them)", name,
                                       base.inputs.empty() ? "inputs" : "outputs");
      if (!base.name.empty() && base.name != name)
        return Status::InvalidArgument("{}/config.pbtxt: name '{}' does not match the directory name '{}'", name,
                                       base.name, name);
    }
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      int64_t v;
      bool overflow = false;
      if (is_version_dir(e, &v, &overflow) && fs::exists(e.path() / base.default_model_filename))
        paths[v] = (e.path() / base.default_model_filename).string();
      if (overflow)
        GPUOPT_LOG(warn, "model '{}': version folder '{}' is skipped: its number does not fit in a signed 64-bit "
                   "integer (at most {})", name, net::printable(e.path().filename().string()),
                   std::numeric_limits<int64_t>::max());
    }
    if (!had_config && opt_.strict_config)
      return Status::InvalidArgument("model '{}' has no config.pbtxt (--strict-model-config=true needs one)", name);
    if (paths.empty())
      return Status::NotFound("model '{}' has no version directory with {} in '{}'", name, base.default_model_filename,
                              dir.string());
  }
  base.name = name;
  for (const auto& w : base.warnings) GPUOPT_LOG(warn, "{}", w);
  // Version policy: which versions to serve.
  std::vector<int64_t> chosen;
  const auto& vp = base.version_policy;
  if (vp.kind == VersionPolicy::Kind::kAll) {
    for (auto& [v, p] : paths) chosen.push_back(v);
  } else if (vp.kind == VersionPolicy::Kind::kSpecific) {
    for (int64_t v : vp.versions) {
      if (!paths.count(v))
        return Status::NotFound("model '{}': version {} named by version_policy is not in the repository", name, v);
      chosen.push_back(v);
    }
  } else {
    for (auto it = paths.rbegin(); it != paths.rend() && chosen.size() < vp.num_versions; ++it)
      chosen.push_back(it->first);
  }
  std::map<int64_t, std::shared_ptr<LoadedVersion>> out;
  for (int64_t ver : chosen) {
    const auto start = std::chrono::steady_clock::now();
    auto lv = std::make_shared<LoadedVersion>();
    lv->name = name;
    lv->version = ver;
    lv->version_str = std::to_string(ver);
    lv->path = paths[ver];
    GPUOPT_ASSIGN_OR_RETURN(ModelSource src, opt_.loader(lv->path));
    lv->model_inputs = src.inputs;
    lv->model_outputs = src.outputs;
    lv->config = base;
    GPUOPT_RETURN_IF_ERROR(
        complete_model_config(&lv->config, src.inputs, src.outputs, had_config, opt_.default_max_batch_size));
    std::vector<std::unique_ptr<ModelInstance>> instances;
    std::vector<bool> gpu_instance;
    std::vector<std::string> instance_names;
    std::string& precisions = lv->precisions;
    GPUOPT_ASSIGN_OR_RETURN(std::vector<PlacedInstance> placed,
                            place_instances(name, lv->config.instance_groups, opt_.cuda_devices));
    // The server's kernel settings (--kernel, else the environment's), the model's gpuopt.kernel.*
    // parameters over them.
    std::optional<KernelSettings> kernels = opt_.kernels;
    if (!lv->config.kernels.empty()) {
      if (!kernels) {
        GPUOPT_ASSIGN_OR_RETURN(kernels, KernelSettings::from_env());
      }
      for (const auto& [k, v] : lv->config.kernels)
        GPUOPT_RETURN_IF_ERROR(kernels->set(k, v).with_context(fmt::format("model '{}'", name)));
    }
    for (const PlacedInstance& p : placed) {
      // The model's own precision, else (GPU instances) Triton's tensorrt precision_mode, else the server's.
      std::string precision = lv->config.precision;
      if (precision.empty() && p.device.is_cuda()) precision = lv->config.gpu_precision;
      if (precision.empty()) precision = opt_.precision;
      if (("/" + precisions + "/").find("/" + precision + "/") == std::string::npos)
        precisions += (precisions.empty() ? "" : "/") + precision;
      InstanceSpec spec{p.name, p.device, precision,
                        lv->config.cuda_graphs.value_or(opt_.cuda_graphs), opt_.cache_dir, lv->config.pipeline,
                        /*defer_graph_capture=*/true, kernels};
      auto b = src.create(spec);
      if (!b.ok()) return b.status().with_context(fmt::format("model '{}' instance {} on {}", name, spec.name,
                                                              spec.device.to_string()));
      instances.push_back(std::move(b).value());
      gpu_instance.push_back(p.device.is_cuda());
      instance_names.push_back(p.name);
    }
    GPUOPT_RETURN_IF_ERROR(warm_up(*lv, instances));
    GPUOPT_RETURN_IF_ERROR(warm_up_largest_batch(*lv, instances, gpu_instance));
    for (size_t i = 0; i < instances.size(); ++i)
      if (gpu_instance[i]) {
        lv->plan_cache = instances[i]->plan_cache();
        break;
      }
    BatcherOptions bo;
    bo.model_name = name;
    bo.max_batch_size = lv->config.max_batch_size;
    bo.dynamic = lv->config.dynamic_batching;
    bo.padding = lv->config.padding;
    bo.inputs = lv->model_inputs;
    bo.outputs = lv->model_outputs;
    bo.instance_names = std::move(instance_names);
    // GPU instances replay a CUDA graph per batch size: batches run at a few sizes (row buckets).
    const bool all_gpu = !gpu_instance.empty() && std::find(gpu_instance.begin(), gpu_instance.end(), false) ==
                                                      gpu_instance.end();
    if (all_gpu && lv->config.dynamic_batching && lv->config.cuda_graphs.value_or(opt_.cuda_graphs))
      bo.row_buckets = default_row_buckets(lv->config.max_batch_size, lv->config.dynamic_batching->preferred_batch_size);
    if (all_gpu) bo.batch_alloc = pinned_batch_tensor;  // batches formed where the GPU copies from
    bo.fill_batches = all_gpu;  // a GPU batch of one row costs a large share of a full one (BatcherOptions)
    bo.answer_pool = answers_;
    lv->batcher = std::make_unique<Batcher>(std::move(bo), std::move(instances), lv->stats);
    lv->batcher->start();
    lv->start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    GPUOPT_LOG(info, "model '{}' version {} ready in {:.2f} s ({} instance(s) at {}, max_batch_size {}, plan cache {})",
               name, ver, lv->start_s, lv->batcher->instance_count(), precisions, lv->config.max_batch_size,
               lv->plan_cache.state);
    out[ver] = std::move(lv);
  }
  return out;
}

Status Repository::load(const std::string& name) {
  std::lock_guard<std::mutex> lk(load_mu_);
  set_state(name, "LOADING", "");
  auto r = load_versions(name);
  if (!r.ok()) {
    std::unique_lock<std::shared_mutex> w(mu_);
    auto& e = models_[name];
    // A failed reload leaves the versions that were serving in place.
    e.state = e.versions.empty() ? "UNAVAILABLE" : "READY";
    e.reason = e.versions.empty() ? r.status().message() : "";
    return r.status();
  }
  std::map<int64_t, std::shared_ptr<LoadedVersion>> old;
  {
    std::unique_lock<std::shared_mutex> w(mu_);
    auto& e = models_[name];
    old = std::move(e.versions);
    e.versions = std::move(r).value();
    e.state = "READY";
    e.reason.clear();
  }
  for (auto& [v, lv] : old) lv->batcher->stop();  // a reload drains the old version
  return Status::Ok();
}

Status Repository::unload(const std::string& name) {
  std::lock_guard<std::mutex> lk(load_mu_);
  std::map<int64_t, std::shared_ptr<LoadedVersion>> old;
  {
    std::unique_lock<std::shared_mutex> w(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return Status::NotFound("unknown model '{}'", net::printable(name));
    old = std::move(it->second.versions);
    it->second.versions.clear();
    it->second.state = "UNLOADING";
  }
  for (auto& [v, lv] : old) lv->batcher->stop();  // queued requests still get answers
  set_state(name, "UNAVAILABLE", "unloaded");
  return Status::Ok();
}

Result<std::shared_ptr<LoadedVersion>> Repository::find(const std::string& name, const std::string& version) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return Status::NotFound("unknown model '{}'", net::printable(name));
  const Entry& e = it->second;
  if (e.versions.empty()) {
    if (e.state == "LOADING") return Status::Unavailable("model '{}' is loading", net::printable(name));
    return Status::Unavailable("model '{}' is not ready{}{}", net::printable(name), e.reason.empty() ? "" : ": ",
                               e.reason);
  }
  if (version.empty()) return e.versions.rbegin()->second;
  for (auto& [v, lv] : e.versions)
    if (lv->version_str == version) return lv;
  return Status::NotFound("model '{}' has no ready version '{}'", net::printable(name), net::printable(version));
}

std::vector<std::shared_ptr<LoadedVersion>> Repository::ready_versions() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  std::vector<std::shared_ptr<LoadedVersion>> out;
  for (auto& [n, e] : models_)
    for (auto& [v, lv] : e.versions) out.push_back(lv);
  return out;
}

nlohmann::json Repository::index(bool ready_only) const {
  nlohmann::json a = nlohmann::json::array();
  std::shared_lock<std::shared_mutex> lk(mu_);
  std::set<std::string> seen;
  for (auto& [n, e] : models_) {
    seen.insert(n);
    if (e.versions.empty()) {
      if (!ready_only) a.push_back({{"name", n}, {"state", e.state}, {"reason", e.reason}});
      continue;
    }
    for (auto& [v, lv] : e.versions)
      a.push_back({{"name", n}, {"version", lv->version_str}, {"state", "READY"}, {"reason", ""}});
  }
  if (!ready_only) {
    lk.unlock();
    for (const auto& n : scan())
      if (!seen.count(n)) a.push_back({{"name", n}, {"state", "UNAVAILABLE"}, {"reason", "unloaded"}});
  }
  return a;
}

bool Repository::all_ready() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  for (auto& [n, e] : models_)
    if (e.state != "READY" && e.reason != "unloaded") return false;
  return true;
}

void Repository::stop_all() {
  for (auto& v : ready_versions()) v->batcher->stop();
}

}  // namespace gpuopt::server
