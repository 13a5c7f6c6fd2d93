// JPEG through libjpeg-turbo (see jpeg.h). libjpeg reports errors through error_exit, which must
// not return: it longjmps back to decode(), where only trivially destructible locals live between
// the setjmp and the calls that may jump.
#include "ops/image/jpeg.h"

#include <csetjmp>
#include <cstdio>
#include <string>

#include <jpeglib.h>

namespace gpuopt::jpeg {

namespace {

struct ErrorMgr {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr cinfo) {
  ErrorMgr* e = reinterpret_cast<ErrorMgr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1: corrupt data the library would paper over) are errors; trace messages are
// dropped.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error(cinfo);
}

// The frame type from the first SOFn marker, so a progressive, lossless or arithmetic-coded file
// is refused by name even when it is cut short before its scans (libjpeg would first complain of
// the missing scan). nullptr: baseline/extended Huffman, or no frame found (libjpeg reports it).
const char* refused_frame(const std::vector<uint8_t>& d) {
  size_t i = 2;
  while (i + 4 <= d.size() && d[i] == 0xFF) {
    const uint8_t m = d[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if (m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE) return "progressive JPEG";
      if (m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF) return "lossless JPEG";
      if (m >= 0xC9) return "arithmetic-coded JPEG";
      return nullptr;
    }
    i += 2 + ((static_cast<size_t>(d[i + 2]) << 8) | d[i + 3]);
  }
  return nullptr;
}

struct Decompress {
  jpeg_decompress_struct cinfo{};
  ErrorMgr err{};
  volatile bool created = false;
  ~Decompress() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

}  // namespace

Status decode(const std::vector<uint8_t>& data, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb) {
  if (const char* refused = refused_frame(data))
    return Status::Unimplemented("{} is not supported (baseline 8-bit grey or YCbCr only)", refused);
  Decompress d;
  d.cinfo.err = jpeg_std_error(&d.err.pub);
  d.err.pub.error_exit = on_error;
  d.err.pub.emit_message = on_message;
  d.err.message[0] = '\0';
  if (setjmp(d.err.jump)) return Status::InvalidArgument("JPEG: {}", d.err.message);
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  jpeg_mem_src(&d.cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&d.cinfo, TRUE);
  const char* refused = nullptr;
  if (d.cinfo.progressive_mode) refused = "progressive JPEG";
  else if (d.cinfo.arith_code) refused = "arithmetic-coded JPEG";
  else if (d.cinfo.data_precision != 8) refused = "12-bit JPEG";
  else if (d.cinfo.num_components != 1 && d.cinfo.num_components != 3) refused = "CMYK JPEG";
  if (refused) return Status::Unimplemented("{} is not supported (baseline 8-bit grey or YCbCr only)", refused);
  const JDIMENSION w = d.cinfo.image_width, h = d.cinfo.image_height;
  // A hostile header can declare 65535x65535 from a few bytes: refuse a frame that decodes to
  // more than 16 MiB plus 256 bytes per byte of file (16 Mpx of RGB for a 4 KB file).
  const uint64_t decoded = uint64_t{w} * h * 3;
  if (decoded > (uint64_t{16} << 20) + 256 * static_cast<uint64_t>(data.size()))
    return Status::InvalidArgument("JPEG declares {}x{} pixels ({} bytes decoded) from a {}-byte file: over the 256x "
                                   "expansion (plus 16 MiB) gpuopt accepts",
                                   w, h, decoded, data.size());
  d.cinfo.out_color_space = JCS_RGB;  // grey is replicated, YCbCr converted
  rgb->assign(static_cast<size_t>(decoded), 0);
  jpeg_start_decompress(&d.cinfo);
  while (d.cinfo.output_scanline < d.cinfo.output_height) {
    JSAMPROW row = rgb->data() + static_cast<size_t>(d.cinfo.output_scanline) * w * 3;
    jpeg_read_scanlines(&d.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d.cinfo);
  *height = h;
  *width = w;
  return Status::Ok();
}

}  // namespace gpuopt::jpeg
