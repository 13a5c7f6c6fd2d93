// Where a model's instances run, from its instance groups and the CUDA devices this host has, as
// Triton places them: a KIND_GPU group makes `count` instances on each GPU it lists (every GPU
// when it lists none); KIND_CPU makes `count` on the CPU; KIND_AUTO is KIND_GPU when the host has
// a GPU, else KIND_CPU. A GPU index the host does not have refuses the model naming it:
//
//   auto p = place_instances("resnet", groups, /*cuda_devices=*/1);
//   // groups = {{.name = "g", .count = 2, .kind = kGpu, .gpus = {1}}}
//   // -> "model 'resnet': instance_group 'g': cuda:1 does not exist: this host has 1 CUDA device"
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "server/model_config.h"

#include <string>
#include <vector>

namespace gpuopt::server {

struct PlacedInstance {
  std::string name;   // "<group>_<n>", n counting over the model's instances
  std::string group;  // the instance group's name
  Device device;      // cpu or cuda:N
};

Result<std::vector<PlacedInstance>> place_instances(const std::string& model, const std::vector<InstanceGroup>& groups,
                                                    int cuda_devices);

}  // namespace gpuopt::server
