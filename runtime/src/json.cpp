#include "troupe/json.hpp"

#include <fmt/format.h>

namespace troupe {

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (unsigned char c : text) {
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
  }
  out.push_back('"');
  return out;
}

} // namespace troupe
