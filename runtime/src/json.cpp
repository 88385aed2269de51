#include "troupe/json.hpp"

#include <fmt/format.h>

namespace troupe {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
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

} // namespace

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    auto len = utf8_sequence(text, i);
    if (len == 0 || c == 0) {
      // Invalid UTF-8 or NUL, which PostgreSQL stores in no jsonb, become U+FFFD: written as its
      // UTF-8 bytes, not as a backslash-u escape, which a database whose encoding is not UTF-8
      // (such as SQL_ASCII) refuses in jsonb.
      out += "\xef\xbf\xbd";
      ++i;
      continue;
    }
    if (len > 1) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        out += fmt::format("\\u{:04x}", c);
      else
        out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

bool is_storable_json_text(std::string_view json) {
  for (std::size_t i = 0; i < json.size();) {
    auto len = utf8_sequence(json, i);
    if (len == 0 || json[i] == 0)
      return false;
    i += len;
  }
  return json.find("\\u0000") == std::string_view::npos;
}

} // namespace troupe
