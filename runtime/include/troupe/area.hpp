// An area is where one application's Troupe data lives: a schema and a table prefix. Every
// identifier derived from an area or a queue name is validated here before any SQL sees it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe {

/// The storage namespace of one application: schema `schema`, tables named `prefix` + name.
struct area {
  std::string schema = "troupe";
  std::string prefix;
};

/// Longest queue name: derived identifiers must fit PostgreSQL's 63 bytes.
inline constexpr std::size_t max_queue_name_length = 47;
/// Longest schema name (an identifier on its own).
inline constexpr std::size_t max_schema_length = 63;
/// Longest table prefix: the longest derived name is the prefix plus
/// "deduplication_expiry_idx" (56 bytes in all).
inline constexpr std::size_t max_prefix_length = 32;

/// Throws troupe::error(invalid_argument) naming the value and the rule when `name` is not a
/// valid queue name: `[a-z_][a-z0-9._-]*`, at most 47 characters.
void validate_queue_name(std::string_view name);
/// Throws when `schema` is not `[a-z_][a-z0-9_]*`, 1 to 63 characters.
void validate_schema(std::string_view schema);
/// Throws when `prefix` is not empty or `[a-z_][a-z0-9_]*`, at most 32 characters.
void validate_prefix(std::string_view prefix);
/// Validates both parts of an area.
void validate_area(const area& a);

/// Whether `name` is a valid queue name (no exception).
bool is_valid_queue_name(std::string_view name) noexcept;

} // namespace troupe
