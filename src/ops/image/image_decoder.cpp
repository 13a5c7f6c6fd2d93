// ImageDecoder: PNG (libpng) and JPEG (libjpeg-turbo) through the libraries, and the simple
// uncompressed formats by hand: BMP (24- and 32-bit), binary PNM (P5 grey, P6 RGB, maxval <= 255)
// and 8-bit TIFF. Other formats (progressive JPEG, compressed TIFF, WebP, JPEG 2000) get an
// "unsupported format" error naming the format. Output [H, W, 3] (RGB or BGR) or [H, W, 1]
// (Grayscale, PIL's "L" conversion: (19595 R + 38470 G + 7471 B + 2^15) >> 16, the weights of
// ITU-R 601-2).
#include "ops/image/jpeg.h"
#include "ops/image/png.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

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

Result<Image> decode_png(const std::vector<uint8_t>& b) {
  Image img;
  GPUOPT_RETURN_IF_ERROR(png::decode(b, &img.h, &img.w, &img.rgb));
  return img;
}

// ---- TIFF: baseline, uncompressed, 8-bit grey (photometric 0/1) or RGB(A) chunky strips.

Result<Image> decode_tiff(const std::vector<uint8_t>& b) {
  const bool le = b[0] == 'I';
  auto u16 = [&](size_t p) -> uint32_t { return le ? (b[p] | (b[p + 1] << 8)) : ((b[p] << 8) | b[p + 1]); };
  auto u32 = [&](size_t p) -> uint32_t {
    return le ? le32(&b[p]) : (static_cast<uint32_t>(b[p]) << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3];
  };
  if (b.size() < 8) return Status::InvalidArgument("TIFF data is truncated");
  const size_t ifd = u32(4);
  if (ifd + 2 > b.size()) return Status::InvalidArgument("TIFF directory offset {} is outside the data", ifd);
  const uint32_t n = u16(ifd);
  if (ifd + 2 + 12 * static_cast<size_t>(n) > b.size()) return Status::InvalidArgument("TIFF directory is truncated");
  uint32_t w = 0, h = 0, comp = 1, photo = 2, spp = 1, planar = 1, rows_per_strip = 0xFFFFFFFF;
  std::vector<uint32_t> bps, offsets, counts;
  // All values of an entry (SHORT or LONG), inline when they fit in 4 bytes.
  auto values = [&](size_t e) -> Result<std::vector<uint32_t>> {
    const uint32_t type = u16(e + 2), count = u32(e + 4);
    const size_t size = type == 3 ? 2 : type == 4 ? 4 : 0;
    if (size == 0) return std::vector<uint32_t>{};
    if (count > (1u << 24)) return Status::InvalidArgument("TIFF entry count {} is implausible", count);
    size_t at = size * count <= 4 ? e + 8 : u32(e + 8);
    if (at + size * count > b.size()) return Status::InvalidArgument("TIFF entry data is outside the file");
    std::vector<uint32_t> v;
    for (uint32_t k = 0; k < count; ++k, at += size) v.push_back(size == 2 ? u16(at) : u32(at));
    return v;
  };
  for (uint32_t k = 0; k < n; ++k) {
    const size_t e = ifd + 2 + 12 * k;
    const uint32_t tag = u16(e);
    GPUOPT_ASSIGN_OR_RETURN(std::vector<uint32_t> v, values(e));
    if (v.empty()) continue;
    switch (tag) {
      case 256: w = v[0]; break;
      case 257: h = v[0]; break;
      case 258: bps = v; break;
      case 259: comp = v[0]; break;
      case 262: photo = v[0]; break;
      case 273: offsets = v; break;
      case 277: spp = v[0]; break;
      case 278: rows_per_strip = v[0]; break;
      case 279: counts = v; break;
      case 284: planar = v[0]; break;
      default: break;
    }
  }
  if (w == 0 || h == 0 || w > (1u << 16) || h > (1u << 16)) return Status::InvalidArgument("TIFF size {}x{} is invalid", w, h);
  if (comp != 1) return Status::Unimplemented("compressed TIFF (compression {}) is not supported (uncompressed only)", comp);
  for (uint32_t d : bps)
    if (d != 8) return Status::Unimplemented("TIFF with {} bits per sample is not supported (8)", d);
  if (planar != 1 && spp > 1) return Status::Unimplemented("planar TIFF is not supported (chunky only)");
  if (!(photo <= 1 && spp >= 1) && !(photo == 2 && spp >= 3)) return Status::Unimplemented("TIFF photometric {} with {} samples is not supported", photo, spp);
  if (offsets.empty()) return Status::InvalidArgument("TIFF has no strips");
  // Concatenate the strips (their byte counts, or what rows_per_strip implies when absent).
  const size_t row = static_cast<size_t>(w) * spp, total = row * h;
  std::vector<uint8_t> px;
  px.reserve(total);
  for (size_t k = 0; k < offsets.size() && px.size() < total; ++k) {
    size_t len = k < counts.size() ? counts[k] : std::min<size_t>(total - px.size(), row * std::min<uint32_t>(rows_per_strip, h));
    if (offsets[k] + len > b.size()) return Status::InvalidArgument("TIFF strip {} is outside the data", k);
    len = std::min(len, total - px.size());
    px.insert(px.end(), b.begin() + offsets[k], b.begin() + offsets[k] + static_cast<std::ptrdiff_t>(len));
  }
  if (px.size() < total) return Status::InvalidArgument("TIFF pixel data is short ({} bytes for {}x{})", px.size(), w, h);
  Image img;
  img.w = w;
  img.h = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (size_t p = 0; p < static_cast<size_t>(w) * h; ++p) {
    const uint8_t* sp = &px[p * spp];
    uint8_t* o = &img.rgb[p * 3];
    if (photo <= 1) o[0] = o[1] = o[2] = photo == 0 ? static_cast<uint8_t>(255 - sp[0]) : sp[0];  // 0: white is zero
    else for (int c = 0; c < 3; ++c) o[c] = sp[c];
  }
  return img;
}

Result<Image> decode_jpeg(const std::vector<uint8_t>& b) {
  Image img;
  GPUOPT_RETURN_IF_ERROR(jpeg::decode(b, &img.h, &img.w, &img.rgb));
  return img;
}

Result<Image> decode(const Node& node, const Tensor& t) {
  if (t.dtype() != DType::U8 || t.rank() != 1)
    return Status::InvalidArgument("{}: encoded_stream must be a 1-D uint8 tensor, got {}", node_label(node), t.describe());
  const std::vector<uint8_t> b(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
  const std::string fmt = sniff(b);
  Result<Image> r = fmt == "BMP" ? decode_bmp(b)
                    : fmt == "PNM" ? decode_pnm(b)
                    : fmt == "PNG" ? decode_png(b)
                    : fmt == "JPEG" ? decode_jpeg(b)
                    : fmt == "TIFF" ? decode_tiff(b)
                                    : Result<Image>(Status::Unimplemented("{} images are not supported (gpuopt decodes BMP, PNM, PNG, baseline JPEG and uncompressed TIFF only)", fmt));
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
