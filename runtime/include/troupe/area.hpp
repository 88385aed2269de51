// An area is where one application's Troupe data lives: a schema and a table prefix. Every
// identifier derived from an area or a queue name is validated here before any SQL sees it.
#pragma once

#include <cstdint>
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

/// `"x"` with inner quotes doubled: a PostgreSQL quoted identifier.
std::string quote_identifier(std::string_view name);

/// The NOTIFY channel of an area: "<schema>.<prefix>wake" when it fits 63 bytes, otherwise
/// "troupe." followed by a 16-digit hash of the area.
std::string wake_channel(const area& a);

/// The channel that wakes result waiters: "<schema>.<prefix>results", hashed like wake_channel
/// when too long.
std::string results_channel(const area& a);

/// The first key of every node liveness lock of this area (a positive 31-bit hash).
std::int32_t node_lock_class(const area& a);

} // namespace troupe
