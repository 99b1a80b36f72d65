// Unicode classes for GPT-2's pre-tokenisation (letters \p{L}, numbers \p{N}, white space \s as
// JavaScript's regular expressions define them), and UTF-8 decoding into code points. The range
// tables are generated (unicode_classes.cpp, by scripts/gen_unicode_classes.js).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

namespace deepshard::data::unicode {

struct Range {
  char32_t first, last;
};
extern const std::span<const Range> kLetter, kNumber, kSpace;

inline bool in(std::span<const Range> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const Range& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// A byte that does not start a valid UTF-8 sequence decodes as itself alone, as kInvalid: it
// belongs to no class (so byte-level BPE still round-trips any byte string).
inline constexpr char32_t kInvalid = 0xFFFFFFFF;

// Decodes the code point starting at text[pos]; sets `length` to its byte count (1 if invalid).
inline char32_t decode_utf8(std::string_view text, size_t pos, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  length = 1;
  if (b0 < 0x80) return b0;
  size_t n;
  char32_t cp, min;
  if ((b0 & 0xE0) == 0xC0)
    n = 2, cp = b0 & 0x1F, min = 0x80;
  else if ((b0 & 0xF0) == 0xE0)
    n = 3, cp = b0 & 0x0F, min = 0x800;
  else if ((b0 & 0xF8) == 0xF0)
    n = 4, cp = b0 & 0x07, min = 0x10000;
  else
    return kInvalid;
  if (pos + n > text.size()) return kInvalid;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  length = n;
  return cp;
}

}  // namespace deepshard::data::unicode
