#include "troupe/json.hpp"

#include "utf8.hpp"

#include <fmt/format.h>

namespace troupe {

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    auto len = detail::utf8_sequence(text, i);
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
    auto len = detail::utf8_sequence(json, i);
    if (len == 0 || json[i] == 0)
      return false;
    i += len;
  }
  return json.find("\\u0000") == std::string_view::npos;
}

} // namespace troupe
