// A message's options: one JSON object, open to every middleware ({"max_retries":3,
// "on_success":"notify"}). Reading never throws: a missing key, a value of another type, or
// options that are not a JSON object all read as "not set".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// An integer option (JSON integer), if set.
std::optional<std::int64_t> option_int(std::string_view options_json, std::string_view key);
/// A string option, if set.
std::optional<std::string> option_string(std::string_view options_json, std::string_view key);
/// A boolean option, if set.
std::optional<bool> option_bool(std::string_view options_json, std::string_view key);

/// `options_json` with `key` set to an integer, a string or a boolean (other keys kept).
/// Throws troupe::error(invalid_argument) when `options_json` is not a JSON object.
std::string with_option(std::string_view options_json, std::string_view key, std::int64_t value);
std::string with_option(std::string_view options_json, std::string_view key,
                        std::string_view value);
std::string with_option(std::string_view options_json, std::string_view key, bool value);
/// (Without these, a string literal would pick the bool overload and an int be ambiguous.)
inline std::string with_option(std::string_view options_json, std::string_view key,
                               const char* value) {
  return with_option(options_json, key, std::string_view(value));
}
inline std::string with_option(std::string_view options_json, std::string_view key, int value) {
  return with_option(options_json, key, static_cast<std::int64_t>(value));
}

} // namespace troupe
