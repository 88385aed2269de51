// The Prometheus text exposition format's one rule that data can break: a label value with a
// backslash, a double quote or a newline is written escaped. Used by a node's /metrics and by
// `troupe exporter`. Internal (not installed).
#pragma once

#include <string>
#include <string_view>

namespace troupe::http {

/// `v` as the inside of a quoted label value.
inline std::string label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

} // namespace troupe::http
