#include "llm/tok_unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>

namespace gpuopt::llm::tok {

Utf8Step utf8_step(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char b = p[i];
  if (b < 0x80) return {b, 1, true};
  uint32_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the valid range of the second byte
  char32_t cp = 0;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {0, 1, false};
  }
  for (uint32_t k = 1; k < len; ++k) {
    if (i + k >= n) return {0, k, false};
    unsigned char c = p[i + k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return {0, k, false};
    cp = (cp << 6) | (c & 0x3F);
  }
  return {cp, len, true};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    Utf8Step st = utf8_step(bytes, i);
    if (st.valid) {
      out.append(bytes.substr(i, st.len));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += st.len;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    if (!st.valid) return false;
    i += st.len;
  }
  return true;
}

namespace {

struct ByteTable {
  std::array<std::string, 256> utf8;
  std::array<int16_t, 324> from_cp;  // every mapped code point is < 256 + 68
  ByteTable() {
    from_cp.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(utf8[b], cp);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

const std::string& byte_to_char_utf8(uint8_t b) {
  return byte_table().utf8[b];
}

int char_to_byte(char32_t cp) {
  return cp < 324 ? byte_table().from_cp[cp] : -1;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  if (c >= 0x24B6 && c <= 0x24E9) return true;  // circled letters: So but Alphabetic
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_mark(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool is_numeric(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

namespace {

void normalize_run(std::string_view run, NormForm form, std::string& out) {
  if (run.empty()) return;
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case NormForm::kNfc:
      opts |= UTF8PROC_COMPOSE;
      break;
    case NormForm::kNfd:
      opts |= UTF8PROC_DECOMPOSE;
      break;
    case NormForm::kNfkc:
      opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormForm::kNfkd:
      opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()), static_cast<utf8proc_ssize_t>(run.size()),
                   &dst, static_cast<utf8proc_option_t>(opts));
  if (n >= 0 && dst) {
    out.append(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  } else {
    out.append(run);  // cannot happen for valid UTF-8 short of running out of memory
  }
  std::free(dst);
}

}  // namespace

std::string normalize_unicode(std::string_view s, NormForm form) {
  std::string out;
  out.reserve(s.size());
  size_t run_start = 0, i = 0;
  while (i < s.size()) {
    Utf8Step st = utf8_step(s, i);
    if (!st.valid) {
      normalize_run(s.substr(run_start, i - run_start), form, out);
      out.append(s.substr(i, st.len));
      run_start = i + st.len;
    }
    i += st.len;
  }
  normalize_run(s.substr(run_start), form, out);
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    if (!st.valid) {
      out.append(s.substr(i, st.len));
    } else if (st.cp == 0x130) {
      out += "i\xCC\x87";  // the one unconditional multi-character lowercase mapping
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(st.cp))));
    }
    i += st.len;
  }
  return out;
}

std::string strip_accents(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step st = utf8_step(s, i);
    if (!st.valid || !is_mark(st.cp)) out.append(s.substr(i, st.len));
    i += st.len;
  }
  return out;
}

}  // namespace gpuopt::llm::tok
