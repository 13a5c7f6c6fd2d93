// ImageDecoder for the formats gpuopt can decode without an image library: BMP (uncompressed
// 24- and 32-bit) and binary PNM (P5 grey, P6 RGB, maxval <= 255). Other formats (JPEG, PNG,
// TIFF, WebP, JPEG 2000) get an "unsupported format" error naming the format: gpuopt links no
// image codec. Output [H, W, 3] (RGB or BGR) or [H, W, 1] (Grayscale, PIL's "L" conversion:
// (19595 R + 38470 G + 7471 B + 2^15) >> 16, the weights of ITU-R 601-2).
#include "backends/cpu/tensor_util.h"

#include <cctype>

namespace gpuopt {
using namespace tensor_util;

namespace {

struct Image {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;  // h * w * 3
};

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

const char* sniff(const std::vector<uint8_t>& b) {
  auto starts = [&](std::initializer_list<int> sig) {
    size_t i = 0;
    for (int c : sig) {
      if (i >= b.size() || b[i] != c) return false;
      ++i;
    }
    return true;
  };
  if (starts({'B', 'M'})) return "BMP";
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return "PNM";
  if (starts({0xFF, 0xD8, 0xFF})) return "JPEG";
  if (starts({0x89, 'P', 'N', 'G'})) return "PNG";
  if (starts({'I', 'I', 42, 0}) || starts({'M', 'M', 0, 42})) return "TIFF";
  if (starts({'R', 'I', 'F', 'F'}) && b.size() >= 12 && b[8] == 'W' && b[9] == 'E' && b[10] == 'B' && b[11] == 'P') return "WebP";
  if (starts({0, 0, 0, 0x0C, 'j', 'P'}) || starts({0xFF, 0x4F, 0xFF, 0x51})) return "JPEG 2000";
  return "unknown";
}

Result<Image> decode_bmp(const std::vector<uint8_t>& b) {
  if (b.size() < 54) return Status::InvalidArgument("BMP data is truncated ({} bytes)", b.size());
  const uint32_t off = le32(&b[10]), dib = le32(&b[14]);
  if (dib < 40) return Status::Unimplemented("BMP with a {}-byte (OS/2) header is not supported", dib);
  const int32_t w = static_cast<int32_t>(le32(&b[18])), hs = static_cast<int32_t>(le32(&b[22]));
  const uint16_t bpp = le16(&b[28]);
  const uint32_t comp = le32(&b[30]);
  if (bpp != 24 && bpp != 32) return Status::Unimplemented("BMP with {} bits per pixel is not supported (24 or 32)", bpp);
  if (comp != 0 && !(comp == 3 && bpp == 32)) return Status::Unimplemented("compressed BMP (compression {}) is not supported", comp);
  if (w <= 0 || hs == 0 || w > (1 << 16) || hs > (1 << 16) || hs < -(1 << 16))
    return Status::InvalidArgument("BMP size {}x{} is invalid", w, hs);
  Image img;
  img.w = w;
  img.h = hs < 0 ? -static_cast<int64_t>(hs) : hs;
  const int64_t bytes = bpp / 8, stride = (img.w * bytes + 3) / 4 * 4;
  if (static_cast<int64_t>(off) + stride * img.h > static_cast<int64_t>(b.size()))
    return Status::InvalidArgument("BMP pixel data is truncated ({} bytes for {}x{})", b.size(), img.w, img.h);
  img.rgb.resize(static_cast<size_t>(img.h * img.w * 3));
  for (int64_t y = 0; y < img.h; ++y) {
    const uint8_t* row = &b[off + (hs > 0 ? img.h - 1 - y : y) * stride];  // bottom-up unless height < 0
    for (int64_t x = 0; x < img.w; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(y * img.w + x) * 3 + c] = row[x * bytes + 2 - c];  // stored B, G, R
  }
  return img;
}

Result<Image> decode_pnm(const std::vector<uint8_t>& b) {
  const char kind = static_cast<char>(b[1]);
  if (kind != '5' && kind != '6') return Status::Unimplemented("PNM type P{} is not supported (binary P5 or P6)", kind);
  size_t i = 2;
  int64_t vals[3];
  for (int64_t& v : vals) {
    while (i < b.size() && (std::isspace(b[i]) || b[i] == '#')) {
      if (b[i] == '#')
        while (i < b.size() && b[i] != '\n') ++i;
      else
        ++i;
    }
    if (i >= b.size() || !std::isdigit(b[i])) return Status::InvalidArgument("PNM header is malformed");
    v = 0;
    while (i < b.size() && std::isdigit(b[i]) && v < (1 << 20)) v = v * 10 + (b[i++] - '0');
  }
  ++i;  // the single whitespace byte before the pixels
  const int64_t w = vals[0], h = vals[1], maxval = vals[2];
  if (w <= 0 || h <= 0 || w > (1 << 16) || h > (1 << 16)) return Status::InvalidArgument("PNM size {}x{} is invalid", w, h);
  if (maxval < 1 || maxval > 255) return Status::Unimplemented("PNM maxval {} is not supported (1..255)", maxval);
  const int64_t ch = kind == '6' ? 3 : 1;
  if (static_cast<int64_t>(i) + w * h * ch > static_cast<int64_t>(b.size()))
    return Status::InvalidArgument("PNM pixel data is truncated ({} bytes for {}x{})", b.size(), w, h);
  Image img;
  img.w = w;
  img.h = h;
  img.rgb.resize(static_cast<size_t>(h * w * 3));
  for (int64_t p = 0; p < h * w; ++p)
    for (int c = 0; c < 3; ++c) {
      const int64_t v = b[i + p * ch + (ch == 3 ? c : 0)];
      img.rgb[p * 3 + c] = static_cast<uint8_t>(maxval == 255 ? v : (v * 255 + maxval / 2) / maxval);
    }
  return img;
}

Result<Image> decode(const Node& node, const Tensor& t) {
  if (t.dtype() != DType::U8 || t.rank() != 1)
    return Status::InvalidArgument("{}: encoded_stream must be a 1-D uint8 tensor, got {}", node_label(node), t.describe());
  const std::vector<uint8_t> b(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
  const std::string fmt = sniff(b);
  Result<Image> r = fmt == "BMP" ? decode_bmp(b)
                    : fmt == "PNM" ? decode_pnm(b)
                                   : Result<Image>(Status::Unimplemented("{} images are not supported (gpuopt decodes BMP and PNM only)", fmt));
  if (!r.ok()) return Status(r.status().code(), fmt::format("{}: {}", node_label(node), r.status().message()));
  return r;
}

Result<int64_t> channels(const Node& node) {
  const std::string pf = node.attr_s("pixel_format", "RGB");
  if (pf == "RGB" || pf == "BGR") return int64_t{3};
  if (pf == "Grayscale") return int64_t{1};
  return Status::InvalidArgument("{}: pixel_format '{}' is not RGB, BGR or Grayscale", node_label(node), pf);
}

}  // namespace

Status infer_ImageDecoder(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_ASSIGN_OR_RETURN(int64_t c, channels(ctx.node));
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && x.dtype != DType::U8) return ctx.error("encoded_stream has dtype {}; expected uint8", dtype_name(x.dtype));
  if (x.rank_known && x.shape.size() != 1) return ctx.error("encoded_stream must be 1-D, got rank {}", x.shape.size());
  if (x.value) {
    GPUOPT_ASSIGN_OR_RETURN(Image img, decode(ctx.node, *x.value));
    set_output(ctx, 0, DType::U8, {img.h, img.w, c});
  } else {
    set_output(ctx, 0, DType::U8, {kUnknownDim, kUnknownDim, c});
  }
  return Status::Ok();
}

Status cpu_ImageDecoder(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(Image img, decode(ctx.node, ctx.in(0)));
  const std::string pf = ctx.node.attr_s("pixel_format", "RGB");
  uint8_t* y = ctx.out(0).data<uint8_t>();
  for (int64_t p = 0; p < img.h * img.w; ++p) {
    const uint8_t* s = &img.rgb[p * 3];
    if (pf == "Grayscale") {
      y[p] = static_cast<uint8_t>((19595u * s[0] + 38470u * s[1] + 7471u * s[2] + 0x8000u) >> 16);
    } else {
      for (int c = 0; c < 3; ++c) y[p * 3 + c] = pf == "BGR" ? s[2 - c] : s[c];
    }
  }
  return Status::Ok();
}
double flops_ImageDecoder(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
