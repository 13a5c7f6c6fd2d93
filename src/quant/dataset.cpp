// Calibration data loading (dataset.h).
#include "quant/dataset.h"

#include "core/npy.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace gpuopt::quant {
namespace fs = std::filesystem;

namespace {

Result<std::vector<float>> parse_floats(std::string_view key, std::string_view v, size_t n) {
  std::vector<float> out;
  std::string s(v);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t slash = s.find('/', pos);
    const std::string part = s.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    char* end = nullptr;
    const float f = std::strtof(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(f))
      return Status::InvalidArgument("--preprocess {}='{}': expected {} numbers separated by '/'", key, v, n);
    out.push_back(f);
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (out.size() == 1 && n == 3) out.assign(3, out[0]);
  if (out.size() != n) return Status::InvalidArgument("--preprocess {}='{}': expected {} numbers separated by '/'", key, v, n);
  return out;
}

bool is_image(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".ppm" || e == ".pgm" || e == ".pnm";
}

// A session running one ImageDecoder node (RGB): the op's own decoders, whatever they link.
Result<std::unique_ptr<Session>> image_decoder_session() {
  onnx::ModelProto m;
  m.set_ir_version(9);
  m.add_opset_import()->set_version(20);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("decode");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("ImageDecoder");
  n->set_name("decode");
  n->add_input("encoded");
  n->add_output("image");
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("pixel_format");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("RGB");
  auto* in = g->add_input();
  in->set_name("encoded");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::UINT8);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("bytes");
  auto* out = g->add_output();
  out->set_name("image");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::UINT8);
  const std::string bytes = m.SerializeAsString();
  GPUOPT_ASSIGN_OR_RETURN(Graph graph, load_onnx_model_from_bytes(bytes.data(), bytes.size()));
  return Session::from_graph(std::move(graph));
}

// Bilinear sample of an [h, w, 3] u8 image at (y, x) in source pixel coordinates (half-pixel centres).
float bilinear(const uint8_t* img, int64_t h, int64_t w, double y, double x, int c) {
  y = std::clamp(y, 0.0, static_cast<double>(h - 1));
  x = std::clamp(x, 0.0, static_cast<double>(w - 1));
  const int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  const double fy = y - y0, fx = x - x0;
  auto px = [&](int64_t yy, int64_t xx) { return static_cast<double>(img[(yy * w + xx) * 3 + c]); };
  return static_cast<float>((px(y0, x0) * (1 - fx) + px(y0, x1) * fx) * (1 - fy) + (px(y1, x0) * (1 - fx) + px(y1, x1) * fx) * fy);
}

Result<Tensor> load_image(const fs::path& file, Session& decoder, const Preprocess& pp) {
  std::ifstream f(file, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) return Status::InvalidArgument("{}: cannot read", file.string());
  if (bytes.empty()) return Status::InvalidArgument("{}: empty file", file.string());
  Tensor enc = Tensor::from_vector(DType::U8, {static_cast<int64_t>(bytes.size())}, bytes);
  auto out = decoder.run({{"encoded", enc}});
  if (!out.ok()) return Status::InvalidArgument("{}: {}", file.string(), out.status().message());
  const Tensor& img = out->at(0).second;
  const int64_t h = img.dim(0), w = img.dim(1);
  // Resize so the shorter side is pp.resize, then crop the centre.
  double sy = 1, sx = 1;
  int64_t rh = h, rw = w;
  if (pp.resize > 0) {
    const double f2 = static_cast<double>(pp.resize) / static_cast<double>(std::min(h, w));
    rh = std::max<int64_t>(1, std::llround(h * f2));
    rw = std::max<int64_t>(1, std::llround(w * f2));
    sy = static_cast<double>(h) / rh;
    sx = static_cast<double>(w) / rw;
  }
  const int64_t oh = pp.crop > 0 ? pp.crop : rh, ow = pp.crop > 0 ? pp.crop : rw;
  if (oh > rh || ow > rw)
    return Status::InvalidArgument("{}: {}x{} after resizing is smaller than the crop {}", file.string(), rw, rh, pp.crop);
  const int64_t top = (rh - oh) / 2, left = (rw - ow) / 2;
  Tensor t = pp.nhwc ? Tensor::empty(DType::F32, {1, oh, ow, 3}) : Tensor::empty(DType::F32, {1, 3, oh, ow});
  float* d = t.data<float>();
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int c = 0; c < 3; ++c) {
        const double srcy = (y + top + 0.5) * sy - 0.5, srcx = (x + left + 0.5) * sx - 0.5;
        const int src_c = pp.bgr ? 2 - c : c;
        const float v = (bilinear(img.data<uint8_t>(), h, w, srcy, srcx, src_c) * pp.scale - pp.mean[c]) / pp.std[c];
        d[pp.nhwc ? (y * ow + x) * 3 + c : (c * oh + y) * ow + x] = v;
      }
  return t;
}

std::string input_file_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return s + ".npy";
}

Result<Tensor> read_checked(const fs::path& file, const TensorInfo& in) {
  auto t = read_npy(file.string());
  if (!t.ok()) return Status::InvalidArgument("{}: {}", file.string(), t.status().message());
  return check_sample_tensor(std::move(*t), in, file.string());
}

}  // namespace

Result<Preprocess> parse_preprocess(std::string_view spec) {
  Preprocess p;
  p.enabled = true;
  if (spec == "imagenet") return p;
  std::string s(spec);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("--preprocess '{}': '{}' is not key=value", spec, item);
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto int_of = [&](int64_t* out) -> Status {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < 0 || x > 65536)
        return Status::InvalidArgument("--preprocess {}='{}': expected a size in pixels", k, v);
      *out = x;
      return Status::Ok();
    };
    if (k == "resize") {
      GPUOPT_RETURN_IF_ERROR(int_of(&p.resize));
    } else if (k == "crop") {
      GPUOPT_RETURN_IF_ERROR(int_of(&p.crop));
    } else if (k == "scale") {
      GPUOPT_ASSIGN_OR_RETURN(auto f, parse_floats(k, v, 1));
      p.scale = f[0];
    } else if (k == "mean" || k == "std") {
      GPUOPT_ASSIGN_OR_RETURN(auto f, parse_floats(k, v, 3));
      auto& dst = k == "mean" ? p.mean : p.std;
      std::copy(f.begin(), f.end(), dst.begin());
      if (k == "std" && std::any_of(f.begin(), f.end(), [](float x) { return x == 0; }))
        return Status::InvalidArgument("--preprocess std='{}': a standard deviation of 0", v);
    } else if (k == "layout" && (v == "nchw" || v == "nhwc")) {
      p.nhwc = v == "nhwc";
    } else if (k == "order" && (v == "rgb" || v == "bgr")) {
      p.bgr = v == "bgr";
    } else {
      return Status::InvalidArgument(
          "--preprocess '{}': unknown '{}' (keys: resize, crop, scale, mean, std, layout=nchw|nhwc, order=rgb|bgr)", spec, item);
    }
  }
  return p;
}

Result<Tensor> check_sample_tensor(Tensor t, const TensorInfo& in, const std::string& file) {
  if (t.dtype() != in.dtype)
    return Status::InvalidArgument("{}: dtype {}, but input '{}' takes {}", file, dtype_name(t.dtype()), in.name,
                                   dtype_name(in.dtype));
  if (in.rank_known) {
    if (t.rank() + 1 == static_cast<int64_t>(in.shape.size())) {
      Shape s = t.shape();
      s.insert(s.begin(), 1);
      GPUOPT_ASSIGN_OR_RETURN(t, t.reshaped(s));
    }
    if (t.rank() != static_cast<int64_t>(in.shape.size()))
      return Status::InvalidArgument("{}: shape {} has rank {}, but input '{}' is {}", file, t.describe(), t.rank(), in.name,
                                     in.shape_string());
    for (size_t d = 0; d < in.shape.size(); ++d)
      if (in.shape[d] >= 0 && t.dim(static_cast<int64_t>(d)) != in.shape[d])
        return Status::InvalidArgument("{}: shape {} does not match input '{}' {} (dim {})", file, t.describe(), in.name,
                                       in.shape_string(), d);
  }
  if (t.numel() == 0) return Status::InvalidArgument("{}: empty array", file);
  if (dtype_is_float(t.dtype()))
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.get_f64(i)))
        return Status::InvalidArgument("{}: {} at element {}", file, std::isnan(t.get_f64(i)) ? "NaN" : "Inf", i);
  return t;
}

Result<std::vector<Sample>> load_calibration_data(const std::string& dir, const std::vector<TensorInfo>& inputs,
                                                  const Preprocess& pp, int64_t max_samples) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument("calibration data '{}': not a folder", dir);
  std::vector<fs::path> npys, images, dirs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory()) dirs.push_back(e.path());
    else if (e.path().extension() == ".npy") npys.push_back(e.path());
    else if (is_image(e.path())) images.push_back(e.path());
  }
  if (ec) return Status::InvalidArgument("calibration data '{}': {}", dir, ec.message());
  std::sort(npys.begin(), npys.end());
  std::sort(images.begin(), images.end());
  std::sort(dirs.begin(), dirs.end());
  const auto limit = [&](size_t n) { return max_samples > 0 ? std::min<size_t>(n, static_cast<size_t>(max_samples)) : n; };
  std::vector<Sample> out;

  if (!images.empty() && pp.enabled) {
    if (inputs.size() != 1)
      return Status::InvalidArgument("calibration data '{}': images feed a one-input model, this one has {} inputs", dir,
                                     inputs.size());
    GPUOPT_ASSIGN_OR_RETURN(auto decoder, image_decoder_session());
    for (size_t i = 0; i < limit(images.size()); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, load_image(images[i], *decoder, pp));
      GPUOPT_ASSIGN_OR_RETURN(t, check_sample_tensor(std::move(t), inputs[0], images[i].string()));
      out.push_back({{t}, images[i].string()});
    }
    return out;
  }
  if (!images.empty() && npys.empty() && dirs.empty())
    return Status::InvalidArgument("calibration data '{}': {} images but no --preprocess (e.g. --preprocess imagenet)", dir,
                                   images.size());
  if (!dirs.empty()) {
    for (size_t i = 0; i < limit(dirs.size()); ++i) {
      Sample s{{}, dirs[i].string()};
      for (const TensorInfo& in : inputs) {
        const fs::path f = dirs[i] / input_file_name(in.name);
        if (!fs::exists(f, ec)) return Status::InvalidArgument("{}: missing, input '{}' needs it", f.string(), in.name);
        GPUOPT_ASSIGN_OR_RETURN(Tensor t, read_checked(f, in));
        s.inputs.push_back(std::move(t));
      }
      out.push_back(std::move(s));
    }
    return out;
  }
  if (npys.empty()) return Status::InvalidArgument("calibration data '{}': no .npy files, subfolders or images", dir);
  const bool stacked = std::all_of(inputs.begin(), inputs.end(), [&](const TensorInfo& in) {
    return fs::exists(fs::path(dir) / input_file_name(in.name), ec);
  });
  if (stacked && (inputs.size() > 1 || npys.size() == 1)) {
    // Stacked: row k of each <input>.npy is sample k.
    std::vector<Tensor> all;
    int64_t rows = -1;
    for (const TensorInfo& in : inputs) {
      const fs::path f = fs::path(dir) / input_file_name(in.name);
      auto t = read_npy(f.string());
      if (!t.ok()) return Status::InvalidArgument("{}: {}", f.string(), t.status().message());
      if (t->rank() == 0) return Status::InvalidArgument("{}: a scalar, expected one row per sample", f.string());
      if (rows >= 0 && t->dim(0) != rows)
        return Status::InvalidArgument("{}: {} rows, but the other inputs' files have {}", f.string(), t->dim(0), rows);
      rows = t->dim(0);
      all.push_back(std::move(*t));
    }
    if (rows <= 0) return Status::InvalidArgument("calibration data '{}': the stacked arrays have no rows", dir);
    for (int64_t k = 0; k < static_cast<int64_t>(limit(static_cast<size_t>(rows))); ++k) {
      Sample s{{}, fmt::format("{} row {}", dir, k)};
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& a = all[i];
        Shape row_shape(a.shape().begin() + 1, a.shape().end());
        Tensor row = Tensor::empty(a.dtype(), row_shape);
        const size_t bytes = row.nbytes();
        std::memcpy(row.raw(), static_cast<const char*>(a.raw()) + static_cast<size_t>(k) * bytes, bytes);
        const std::string what = fmt::format("{} (row {})", (fs::path(dir) / input_file_name(inputs[i].name)).string(), k);
        GPUOPT_ASSIGN_OR_RETURN(row, check_sample_tensor(std::move(row), inputs[i], what));
        s.inputs.push_back(std::move(row));
      }
      out.push_back(std::move(s));
    }
    return out;
  }
  if (inputs.size() != 1)
    return Status::InvalidArgument(
        "calibration data '{}': a {}-input model needs one subfolder per sample or one stacked <input>.npy per input", dir,
        inputs.size());
  for (size_t i = 0; i < limit(npys.size()); ++i) {
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, read_checked(npys[i], inputs[0]));
    out.push_back({{t}, npys[i].string()});
  }
  return out;
}

}  // namespace gpuopt::quant
