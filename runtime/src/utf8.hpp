// UTF-8 for the base's text writers (JSON strings, log lines): internal to runtime/src.
#pragma once

#include <cstddef>
#include <string_view>

namespace troupe::detail {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one (overlong
// forms and surrogates are not).
inline std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  std::size_t len = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xe  ? 3
                    : (c >> 3) == 0x1e ? 4
                                       : 0;
  if (len == 0 || i + len > text.size())
    return 0;
  for (std::size_t k = 1; k < len; ++k)
    if ((byte(i + k) & 0xc0) != 0x80)
      return 0;
  if (len == 2 && c < 0xc2)
    return 0; // overlong
  if (len == 3) {
    unsigned cp = ((c & 0x0f) << 12) | ((byte(i + 1) & 0x3f) << 6) | (byte(i + 2) & 0x3f);
    if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
  }
  if (len == 4) {
    unsigned cp = ((c & 0x07) << 18) | ((byte(i + 1) & 0x3f) << 12) | ((byte(i + 2) & 0x3f) << 6) |
                  (byte(i + 3) & 0x3f);
    if (cp < 0x10000 || cp > 0x10ffff)
      return 0;
  }
  return len;
}

} // namespace troupe::detail
