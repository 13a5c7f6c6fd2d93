// libFuzzer target: an ONNX model through the loader (protobuf parse, import, shape inference
// through every op's infer function) and the default passes (constant folding runs the CPU
// kernels on what it can). Must end in a Status, never crash, hang or allocate without bound.
//
// Structure-aware: LLVMFuzzerCustomMutator parses the input as an onnx ModelProto and changes
// what shape arithmetic reads (dims of inputs/outputs/value_info and initializers, integer and
// float attributes, int64 initializer values such as Expand's or Reshape's shape, op types), then
// serializes it again, so mutations stay valid models that reach inference instead of dying in
// the protobuf parser. Inputs that do not parse get libFuzzer's byte mutations.
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "passes/passes.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = gpuopt::load_onnx_model_from_bytes(data, size);
  if (!g.ok()) return 0;
  for (const auto& v : g->values()) (void)g->shape_string(v.info.shape);  // describes itself
  (void)gpuopt::run_default_passes(&*g);
  return 0;
}

namespace {

int64_t interesting(std::mt19937_64& rng) {
  static const int64_t kValues[] = {0, 1, 2, 3, -1, -2, 7, 255, 256, 65535, (int64_t{1} << 31) - 1, int64_t{1} << 31,
                                    int64_t{1} << 32, int64_t{1} << 40, int64_t{1} << 50, int64_t{1} << 62,
                                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  if (rng() % 3 == 0) return static_cast<int64_t>(rng() % 80) - 16;
  return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
}

// Every integer the shape functions read, as pointers into the message being mutated.
struct Slots {
  std::vector<std::function<void(int64_t)>> ints;  // setters (protobuf scalars have no pointers)
  std::vector<std::function<void(float)>> floats;
  std::vector<onnx::TensorShapeProto*> shapes;
  std::vector<std::string*> raw_int64;  // raw_data of INT64 initializers
};

void collect_type(onnx::ValueInfoProto* v, Slots* s) {
  if (!v->type().has_tensor_type() || !v->type().tensor_type().has_shape()) return;
  auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  s->shapes.push_back(shape);
  for (auto& d : *shape->mutable_dim())
    if (d.has_dim_value()) s->ints.push_back([&d](int64_t v) { d.set_dim_value(v); });
}

void collect_tensor(onnx::TensorProto* t, Slots* s) {
  for (auto& d : *t->mutable_dims()) s->ints.push_back([&d](int64_t v) { d = v; });
  for (auto& x : *t->mutable_int64_data()) s->ints.push_back([&x](int64_t v) { x = v; });
  for (auto& x : *t->mutable_float_data()) s->floats.push_back([&x](float v) { x = v; });
  if (t->data_type() == onnx::TensorProto::INT64 && t->raw_data().size() >= 8) s->raw_int64.push_back(t->mutable_raw_data());
}

Slots collect(onnx::ModelProto* m) {
  Slots s;
  auto* g = m->mutable_graph();
  for (auto& v : *g->mutable_input()) collect_type(&v, &s);
  for (auto& v : *g->mutable_output()) collect_type(&v, &s);
  for (auto& v : *g->mutable_value_info()) collect_type(&v, &s);
  for (auto& t : *g->mutable_initializer()) collect_tensor(&t, &s);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_i()) s.ints.push_back([&a](int64_t v) { a.set_i(v); });
      for (auto& x : *a.mutable_ints()) s.ints.push_back([&x](int64_t v) { x = v; });
      if (a.has_f()) s.floats.push_back([&a](float v) { a.set_f(v); });
      for (auto& x : *a.mutable_floats()) s.floats.push_back([&x](float v) { x = v; });
      if (a.has_t()) collect_tensor(a.mutable_t(), &s);
    }
  return s;
}

// Ops whose shape functions compute sizes from data: a node may become one of them.
const char* kShapeOps[] = {"Expand", "ConstantOfShape", "Tile", "Range", "Resize", "Pad", "Reshape", "Concat",
                           "Slice", "Upsample", "DepthToSpace", "SpaceToDepth", "OneHot", "Conv", "MaxPool",
                           "AveragePool", "ConvTranspose", "Gather", "Squeeze", "Unsqueeze", "Flatten", "Trilu",
                           "EyeLike", "TopK", "CenterCropPad", "Einsum", "MatMul", "Transpose", "Split"};

bool mutate(onnx::ModelProto* m, std::mt19937_64& rng) {
  Slots s = collect(m);
  auto* g = m->mutable_graph();
  switch (rng() % 6) {
    case 0:
    case 1:
      if (s.ints.empty()) return false;
      s.ints[rng() % s.ints.size()](interesting(rng));
      return true;
    case 2: {
      if (s.raw_int64.empty()) return false;
      std::string* raw = s.raw_int64[rng() % s.raw_int64.size()];
      const int64_t v = interesting(rng);
      std::memcpy(raw->data() + 8 * (rng() % (raw->size() / 8)), &v, 8);
      return true;
    }
    case 3: {
      if (s.floats.empty()) return false;
      static const float kF[] = {0.0f, -1.0f, 0.5f, 2.0f, 1e10f, 1e30f, std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()};
      s.floats[rng() % s.floats.size()](kF[rng() % 8]);
      return true;
    }
    case 4: {  // add or drop a dim
      if (s.shapes.empty()) return false;
      auto* shape = s.shapes[rng() % s.shapes.size()];
      if (shape->dim_size() > 0 && rng() % 2) shape->mutable_dim()->RemoveLast();
      else shape->add_dim()->set_dim_value(interesting(rng));
      return true;
    }
    default: {
      if (g->node_size() == 0) return false;
      g->mutable_node(static_cast<int>(rng() % g->node_size()))
          ->set_op_type(kShapeOps[rng() % (sizeof(kShapeOps) / sizeof(kShapeOps[0]))]);
      return true;
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto m;
  std::mt19937_64 rng(seed);
  // One time in eight, or when the bytes are no model, plain byte mutations (they find parser bugs).
  if (rng() % 8 == 0 || !m.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  bool changed = false;
  for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) changed = mutate(&m, rng) || changed;
  if (!changed) return LLVMFuzzerMutate(data, size, max_size);
  const std::string out = m.SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
