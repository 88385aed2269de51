// The scan for durations too large for CAF's timespan (find_overflowing_duration in
// option_table.hpp), which CAF 0.17 would wrap around to a wrong value when it parses them.
#include "config/option_table.hpp"

#include <cctype>
#include <cstdint>
#include <limits>

namespace troupe::config::detail {

std::optional<overflowing_duration> find_overflowing_duration(std::string_view text) {
  struct unit {
    std::string_view name;
    std::int64_t ns;
  };
  // The units of CAF 0.17's timespans, longest names first: "min" before "ms", "ms" before "s".
  constexpr unit units[] = {{"min", 60'000'000'000}, {"ns", 1},
                            {"us", 1'000},           {"ms", 1'000'000},
                            {"s", 1'000'000'000},    {"h", 3'600'000'000'000}};
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto is_digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  bool in_string = false;
  bool in_comment = false;
  for (std::size_t i = 0; i < text.size();) {
    // Strings and comments hold no duration (and the text of a DSN must never be echoed).
    char c = text[i];
    if (in_comment) {
      in_comment = c != '\n';
      ++i;
      continue;
    }
    if (in_string) {
      in_string = c != '"';
      i += c == '\\' ? 2 : 1;
      continue;
    }
    if (c == '"' || c == ';') {
      in_string = c == '"';
      in_comment = c == ';';
      ++i;
      continue;
    }
    if (!is_digit(c) || (i > 0 && is_word(text[i - 1]))) {
      ++i;
      continue;
    }
    auto start = i;
    bool too_big = false;
    std::int64_t n = 0;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      auto digit = text[i] - '0';
      if (n > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
        too_big = true;
      else
        n = n * 10 + digit;
    }
    for (const auto& u : units) {
      if (text.substr(i, u.name.size()) != u.name)
        continue;
      auto end = i + u.name.size();
      if (end < text.size() && is_word(text[end]))
        break; // a word such as "5seconds", not a duration
      if (too_big || n > std::numeric_limits<std::int64_t>::max() / u.ns)
        return overflowing_duration{start, std::string(text.substr(start, end - start))};
      break;
    }
  }
  return std::nullopt;
}

} // namespace troupe::config::detail
