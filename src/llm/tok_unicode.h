// UTF-8 and Unicode helpers for the tokenizer (tokenizer.h): stepping through possibly invalid
// UTF-8 the way Rust's String::from_utf8_lossy does, GPT-2's byte<->char table, Unicode
// normalization (utf8proc) and the character classes `tokenizers` uses (char::is_whitespace,
// regex \w, char::to_lowercase).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuopt::llm::tok {

// One step through UTF-8 at `i`: a valid character (cp, len) or, when invalid, the maximal
// subpart of an ill-formed sequence (len >= 1) as the Unicode standard's "substitution of maximal
// subparts" defines it (what from_utf8_lossy replaces with one U+FFFD).
struct Utf8Step {
  char32_t cp = 0;
  uint32_t len = 1;
  bool valid = false;
};
Utf8Step utf8_step(std::string_view s, size_t i);
void append_utf8(std::string& out, char32_t cp);
std::string utf8_lossy(std::string_view bytes);  // invalid subparts -> U+FFFD
bool is_valid_utf8(std::string_view s);

// GPT-2's bytes_to_unicode(): each byte maps to a printable character.
const std::string& byte_to_char_utf8(uint8_t b);  // the UTF-8 of that character
int char_to_byte(char32_t cp);                    // -1 when cp is not one of the 256

bool is_whitespace(char32_t cp);  // Unicode White_Space (Rust char::is_whitespace)
bool is_word_char(char32_t cp);   // Rust regex's Unicode \w
bool is_mark(char32_t cp);        // General_Category Mark (Mn, Mc, Me)
bool is_numeric(char32_t cp);     // Rust char::is_numeric: Nd, Nl, No

enum class NormForm { kNfc, kNfd, kNfkc, kNfkd };
// Normalizes each valid run of s; invalid bytes pass through unchanged.
std::string normalize_unicode(std::string_view s, NormForm form);
std::string lowercase(std::string_view s);      // per character, Rust's char::to_lowercase
std::string strip_accents(std::string_view s);  // drops marks, as StripAccents does

}  // namespace gpuopt::llm::tok
