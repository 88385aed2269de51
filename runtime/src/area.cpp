#include "troupe/area.hpp"

#include "troupe/error.hpp"

#include <fmt/format.h>

namespace troupe {

namespace {

bool is_lower_alpha(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(is_lower_alpha(s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(is_lower_alpha(c) || is_digit(c) || c == '_'))
      return false;
  return true;
}

} // namespace

bool is_valid_queue_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > max_queue_name_length)
    return false;
  if (!(is_lower_alpha(name[0]) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(is_lower_alpha(c) || is_digit(c) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

void validate_queue_name(std::string_view name) {
  if (!is_valid_queue_name(name))
    throw error(errc::invalid_argument,
                fmt::format("invalid queue name \"{}\": a queue name must start with a lower-case "
                            "letter or underscore, hold only lower-case letters, digits, '.', "
                            "'-' and '_', and be at most {} characters long",
                            name, max_queue_name_length));
}

void validate_schema(std::string_view schema) {
  if (!is_identifier(schema) || schema.size() > max_schema_length)
    throw error(errc::invalid_argument,
                fmt::format("invalid schema name \"{}\": a schema name must start with a "
                            "lower-case letter or underscore, hold only lower-case letters, "
                            "digits and '_', and be 1 to {} characters long",
                            schema, max_schema_length));
}

void validate_prefix(std::string_view prefix) {
  if (!prefix.empty() && (!is_identifier(prefix) || prefix.size() > max_prefix_length))
    throw error(errc::invalid_argument,
                fmt::format("invalid table prefix \"{}\": a prefix is empty or starts with a "
                            "lower-case letter or underscore, holds only lower-case letters, "
                            "digits and '_', and is at most {} characters long",
                            prefix, max_prefix_length));
}

void validate_area(const area& a) {
  validate_schema(a.schema);
  validate_prefix(a.prefix);
}

} // namespace troupe
