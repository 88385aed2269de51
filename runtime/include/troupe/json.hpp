// Task arguments and results as plain JSON, through cereal: arguments are one JSON array
// (`[2, "x", [1, 2]]`), a result is one JSON value. Rows stay readable in psql, and any language
// can publish a message by writing such an array.
#pragma once

#include "troupe/error.hpp"

#include <cereal/archives/json.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

namespace troupe {

namespace detail {

inline std::string strip_newlines(std::string s) {
  std::erase(s, '\n');
  return s;
}

} // namespace detail

/// Encodes `xs` as one JSON array.
template <class... Ts>
std::string encode_args(const Ts&... xs) {
  if constexpr (sizeof...(Ts) == 0) {
    return "[]";
  } else {
    std::ostringstream os;
    {
      cereal::JSONOutputArchive ar(os, cereal::JSONOutputArchive::Options::NoIndent());
      ar(cereal::make_size_tag(static_cast<cereal::size_type>(sizeof...(Ts))));
      ar(xs...);
    }
    return detail::strip_newlines(os.str());
  }
}

/// Decodes a JSON array into a tuple of `Ts`. Throws troupe::error(decode_failed) when it is
/// not an array of exactly that many values of those types. The error's text gives the input's
/// size, not its content: arguments can hold what must not reach a log or a failure record
/// (a task may opt in to a prefix of them: task_options::quote_args_in_failures).
template <class... Ts>
std::tuple<Ts...> decode_args(std::string_view json) {
  std::tuple<Ts...> out;
  try {
    std::istringstream is{std::string(json)};
    cereal::JSONInputArchive ar(is);
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    if (n != sizeof...(Ts))
      throw error(errc::decode_failed,
                  "arguments (" + std::to_string(json.size()) + " bytes of JSON): expected " +
                    std::to_string(sizeof...(Ts)) + " values, got " + std::to_string(n));
    std::apply([&](auto&... xs) { (ar(xs), ...); }, out);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    throw error(errc::decode_failed, "arguments (" + std::to_string(json.size()) +
                                       " bytes of JSON) do not decode into the task's " +
                                       std::to_string(sizeof...(Ts)) +
                                       " parameter types: " + e.what());
  }
  return out;
}

/// Encodes one value as JSON (a result).
template <class T>
std::string encode_value(const T& x) {
  auto arr = encode_args(x);
  return arr.substr(1, arr.size() - 2);
}

/// Decodes one JSON value (a result). Throws troupe::error(decode_failed).
template <class T>
T decode_value(std::string_view json) {
  return std::get<0>(decode_args<T>("[" + std::string(json) + "]"));
}

/// `text` as a JSON string literal, quotes and control characters escaped. Bytes that are not
/// valid UTF-8, and NUL, become U+FFFD, so the result is always storable as jsonb.
std::string json_quote(std::string_view text);

/// Whether PostgreSQL can store `json` as jsonb text: valid UTF-8 without NUL, and no \u0000
/// escape. (Whether it is well-formed JSON is not checked here.)
bool is_storable_json_text(std::string_view json);

} // namespace troupe
