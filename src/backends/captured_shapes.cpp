#include "backends/captured_shapes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

namespace gpuopt {

std::string signature_text(const ShapeSignature& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ';';
    out += fmt::format("{}[{}]", dtype_name(s[i].first), fmt::join(s[i].second, ","));
  }
  return out;
}

Result<ShapeSignature> parse_signature(std::string_view text) {
  ShapeSignature sig;
  if (text.empty()) return Status::InvalidArgument("an empty shape list");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(pos, end - pos);
    const size_t open = part.find('[');
    if (open == std::string_view::npos || part.back() != ']')
      return Status::InvalidArgument("'{}' is not <dtype>[<dims>]", part);
    auto dtype = dtype_from_name(part.substr(0, open));
    if (!dtype || *dtype == DType::Undefined)
      return Status::InvalidArgument("'{}': unknown dtype '{}'", part, part.substr(0, open));
    Shape shape;
    std::string_view dims = part.substr(open + 1, part.size() - open - 2);
    while (!dims.empty()) {
      const size_t comma = dims.find(',');
      const std::string_view d = dims.substr(0, comma);
      int64_t v = -1;
      auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
      if (ec != std::errc() || p != d.data() + d.size() || v < 0)
        return Status::InvalidArgument("'{}': dim '{}' is not a non-negative integer", part, d);
      shape.push_back(v);
      if (comma == std::string_view::npos) break;
      dims.remove_prefix(comma + 1);
      if (dims.empty()) return Status::InvalidArgument("'{}': a dim is missing after ','", part);
    }
    sig.emplace_back(*dtype, std::move(shape));
    pos = end + 1;
  }
  return sig;
}

std::string captured_shape_key(std::string_view model_hash, const ShapeSignature& s) {
  return fmt::format("graph {} {}", model_hash, signature_text(s));
}

namespace {

Status fits(const ShapeSignature& s, const ShapeSignature& declared) {
  if (s.size() != declared.size())
    return Status::InvalidArgument("{} inputs listed, the model has {}", s.size(), declared.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].first != declared[i].first)
      return Status::InvalidArgument("input {} is {}, the model's is {}", i, dtype_name(s[i].first),
                                     dtype_name(declared[i].first));
    const Shape& want = declared[i].second;
    if (want.empty() && s[i].second.empty()) continue;
    if (s[i].second.size() != want.size())
      return Status::InvalidArgument("input {} has rank {}, the model's has rank {}", i, s[i].second.size(), want.size());
    for (size_t d = 0; d < want.size(); ++d)
      if (want[d] >= 0 && s[i].second[d] != want[d])
        return Status::InvalidArgument("input {} dim {} is {}, the model fixes it at {}", i, d, s[i].second[d], want[d]);
  }
  return Status::Ok();
}

}  // namespace

std::vector<ShapeSignature> captured_shapes(const PlanEntries& entries, std::string_view model_hash,
                                            const ShapeSignature& declared, std::vector<std::string>* skipped) {
  std::vector<ShapeSignature> out;
  const std::string prefix = fmt::format("graph {} ", model_hash);
  for (auto it = entries.lower_bound(prefix); it != entries.end() && it->first.starts_with(prefix); ++it) {
    const std::string_view text = std::string_view(it->first).substr(prefix.size());
    Status st = it->second == kCapturedValue ? Status::Ok()
                                             : Status::InvalidArgument("value '{}' is not '{}'", it->second, kCapturedValue);
    Result<ShapeSignature> sig = st.ok() ? parse_signature(text) : Result<ShapeSignature>(st);
    if (sig.ok()) st = fits(*sig, declared);
    if (!sig.ok()) st = sig.status();
    if (!st.ok()) {
      if (skipped) skipped->push_back(fmt::format("{}: {}", it->first, st.message()));
      continue;
    }
    out.push_back(std::move(sig).value());
  }
  return out;
}

}  // namespace gpuopt
