#include "ir/graph.h"

namespace gpuopt {

const Attribute* Node::attr(std::string_view n) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t Node::attr_i(std::string_view n, int64_t def) const {
  const Attribute* a = attr(n);
  return a ? a->i : def;
}

float Node::attr_f(std::string_view n, float def) const {
  const Attribute* a = attr(n);
  return a ? a->f : def;
}

std::string Node::attr_s(std::string_view n, const std::string& def) const {
  const Attribute* a = attr(n);
  return a ? a->s : def;
}

std::vector<int64_t> Node::attr_ints(std::string_view n, std::vector<int64_t> def) const {
  const Attribute* a = attr(n);
  return a ? a->ints : def;
}

std::vector<float> Node::attr_floats(std::string_view n, std::vector<float> def) const {
  const Attribute* a = attr(n);
  return a ? a->floats : def;
}

}  // namespace gpuopt
