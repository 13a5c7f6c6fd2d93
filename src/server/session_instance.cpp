// ModelInstance over gpuopt::Session: each instance owns its own Session (its own backend
// context, stream and buffers on the GPU), so instances never share mutable state.
#include "core/log.h"
#include "monitor/cuda_props.h"
#include "gpuopt/session.h"
#include "server/model_instance.h"

namespace gpuopt::server {
namespace {

class SessionInstance : public ModelInstance {
 public:
  SessionInstance(std::unique_ptr<Session> s, bool pipeline) : session_(std::move(s)), pipeline_(pipeline) {}
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override { return session_->run_ordered(inputs); }
  PlanCacheStatus plan_cache() const override { return session_->plan_cache(); }
  bool background_step() override { return session_->capture_deferred_shape(); }
  bool overlaps() const override { return pipeline_; }
  Status begin(const std::vector<Tensor>& inputs) override { return session_->begin_ordered(inputs); }
  Result<std::vector<Tensor>> finish() override { return session_->finish_ordered(); }

 private:
  std::unique_ptr<Session> session_;
  bool pipeline_;
};

std::vector<IoSpec> to_specs(const std::vector<TensorInfo>& v) {
  std::vector<IoSpec> out;
  for (const auto& t : v) {
    IoSpec s{t.name, t.dtype, t.shape, t.rank_known};
    for (auto& d : s.shape)
      if (d < 0) d = -1;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

int cuda_device_count() {
  auto d = cuda_devices();
  return d.ok() ? static_cast<int>(d->size()) : 0;
}

ModelLoader session_model_loader() {
  return [](const std::string& path) -> Result<ModelSource> {
    // One session up front reads and checks the model and gives its declared inputs/outputs.
    SessionOptions cpu;
    cpu.device = Device::cpu();
    GPUOPT_ASSIGN_OR_RETURN(auto probe, Session::load(path, cpu));
    ModelSource src;
    src.inputs = to_specs(probe->inputs());
    src.outputs = to_specs(probe->outputs());
    src.create = [path](const InstanceSpec& spec) -> Result<std::unique_ptr<ModelInstance>> {
      SessionOptions so;
      so.device = spec.device;  // cpu, or cuda:N for a KIND_GPU instance: its own backend on GPU N
      so.precision = spec.precision;
      so.cuda_graphs = spec.cuda_graphs;
      so.cache_dir = spec.cache_dir;
      so.defer_graph_capture = spec.defer_graph_capture;  // captured after `ready`, while idle
      so.kernels = spec.kernels;
      GPUOPT_ASSIGN_OR_RETURN(auto s, Session::load(path, so));
      return std::unique_ptr<ModelInstance>(std::make_unique<SessionInstance>(std::move(s), spec.pipeline));
    };
    return src;
  };
}

}  // namespace gpuopt::server
