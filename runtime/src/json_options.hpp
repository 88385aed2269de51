// Options whose value is a JSON document of its own (a pipeline's next step). Internal to
// Troupe; the public readers and setters of scalar options are in troupe/options.hpp.
#pragma once

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>

namespace troupe::detail {

/// `v` as compact JSON text.
std::string write_json(const rapidjson::Value& v);

/// The JSON text of option `key` when it is a JSON object; none otherwise (missing, another
/// type, options that are not an object).
std::optional<std::string> option_object(std::string_view options_json, std::string_view key);

/// `options_json` with `key` set to the JSON object `object_json`. Throws
/// troupe::error(invalid_argument) when either is not a JSON object.
std::string with_object_option(std::string_view options_json, std::string_view key,
                               std::string_view object_json);

/// The JSON text of option `key`, whatever its type; none when it is missing.
std::optional<std::string> option_json(std::string_view options_json, std::string_view key);

/// `options_json` with `key` set to the JSON value `value_json`. Throws
/// troupe::error(invalid_argument) when it does not parse.
std::string with_json_option(std::string_view options_json, std::string_view key,
                             std::string_view value_json);

/// `array_json` (a JSON array) with `value_json` (any JSON value) appended. Throws
/// troupe::error(invalid_argument) when either does not parse.
std::string append_to_array(std::string_view array_json, std::string_view value_json);

} // namespace troupe::detail
