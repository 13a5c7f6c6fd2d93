// PNG through libpng (see png.h). libpng reports errors through png_error, which longjmps back
// to decode()'s setjmp (png_jmpbuf); only trivially destructible locals live across it.
#include "ops/image/png.h"

#include <cstring>
#include <string>

#include <png.h>

namespace gpuopt::png {

namespace {

struct Source {
  const uint8_t* data;
  size_t size, pos;
};

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  Source* s = static_cast<Source*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "the file ends inside a chunk");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

struct Errors {
  char message[256] = {0};
};

void on_error(png_structp png, png_const_charp msg) {
  Errors* e = static_cast<Errors*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof(e->message), "%s", msg);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}  // benign (unknown chunks, sRGB profile notes)

struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~Reader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

Status decode(const std::vector<uint8_t>& data, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb) {
  Errors errors;
  Source src{data.data(), data.size(), 0};
  Reader r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors, on_error, on_warning);
  if (!r.png) return Status::OutOfMemory("PNG: cannot create the libpng reader");
  r.info = png_create_info_struct(r.png);
  if (!r.info) return Status::OutOfMemory("PNG: cannot create the libpng reader");
  if (setjmp(png_jmpbuf(r.png))) return Status::InvalidArgument("PNG: {}", errors.message);
  png_set_read_fn(r.png, &src, read_bytes);
  png_set_crc_action(r.png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
#ifdef PNG_IGNORE_ADLER32
  png_set_option(r.png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
  png_set_user_limits(r.png, 1u << 16, 1u << 16);
  png_read_info(r.png, r.info);
  const png_uint_32 w = png_get_image_width(r.png, r.info), h = png_get_image_height(r.png, r.info);
  const uint64_t decoded = uint64_t{w} * h * 3;
  if (decoded > (uint64_t{16} << 20) + 1032 * static_cast<uint64_t>(data.size()))
    return Status::InvalidArgument("PNG declares {}x{} pixels ({} bytes decoded) from a {}-byte file: over deflate's "
                                   "1032x expansion (plus 16 MiB)",
                                   w, h, decoded, data.size());
  png_set_strip_16(r.png);
  png_set_strip_alpha(r.png);
  png_set_palette_to_rgb(r.png);
  png_set_expand_gray_1_2_4_to_8(r.png);
  png_set_gray_to_rgb(r.png);
  png_set_packing(r.png);
  png_set_interlace_handling(r.png);
  png_read_update_info(r.png, r.info);
  if (png_get_rowbytes(r.png, r.info) != size_t{w} * 3)
    return Status::Internal("PNG: libpng gives {} bytes per row for {} RGB pixels", png_get_rowbytes(r.png, r.info), w);
  rgb->assign(static_cast<size_t>(decoded), 0);
  for (png_uint_32 pass = 0, passes = static_cast<png_uint_32>(png_set_interlace_handling(r.png)); pass < passes; ++pass)
    for (png_uint_32 y = 0; y < h; ++y) png_read_row(r.png, rgb->data() + size_t{y} * w * 3, nullptr);
  png_read_end(r.png, nullptr);
  *height = h;
  *width = w;
  return Status::Ok();
}

}  // namespace gpuopt::png
