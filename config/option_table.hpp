// The table of every option Troupe's configuration knows (section, key, type, description, and
// where the value goes), the reading of a merged caf::settings tree against it, and the reference
// file written from it. Internal to config/: it names CAF types, so only config/ sources include
// it.
#pragma once

#include "troupe/config.hpp"

#include <caf/settings.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::config::detail {

/// An option's type as troupe.ini writes it.
enum class value_kind {
  /// "text" in double quotes.
  string,
  /// A 32-bit integer.
  integer,
  /// A CAF timespan (30s, 500ms, 2min) or an integer of milliseconds; whole milliseconds only.
  duration,
  /// true or false.
  boolean,
};

/// The section of per-queue tables: `[queues]` with `name={concurrency=2, ...}`.
inline constexpr std::string_view queues_section = "queues";

/// The section of named limiters: `[limits]` with `payments={kind="concurrent", limit=5}`.
inline constexpr std::string_view limits_section = "limits";

/// Whether `section` holds one table per name (`[queues]`, `[limits]`), whose flags are
/// `--section.<name>.<key>`.
constexpr bool is_table_section(std::string_view section) {
  return section == queues_section || section == limits_section;
}

/// One option as flags, help texts and the reference file present it.
struct option_info {
  /// "database", "area", "node" or "logging"; `queues_section` for the keys of a queue's table,
  /// `limits_section` for those of a limiter's.
  std::string_view section;
  std::string_view key;
  value_kind kind;
  std::string_view description;
};

/// Every option: those of the plain sections in reference order, then a queue table's keys,
/// then a limiter table's.
const std::vector<option_info>& all_options();

/// The option `key` of `section` (a table section for a table's keys), or nullptr.
const option_info* find_option(std::string_view section, std::string_view key);

/// Whether `name` is one of Troupe's own sections.
bool is_troupe_section(std::string_view name);

/// What an error says a value of `kind` should be: "an integer", "a duration such as ...".
std::string_view expected_text(value_kind kind);

/// The first duration in `text` (INI text or one flag's value) too large for CAF's timespan,
/// which would wrap around to a wrong value when parsed ("100000000h"): its offset and its
/// spelling. Quoted strings and `;` comments are skipped. None when every duration fits.
struct overflowing_duration {
  std::size_t offset = 0;
  std::string spelling;
};
std::optional<overflowing_duration> find_overflowing_duration(std::string_view text);

/// Where an option's value lives; its alternative is also the option's type.
using field_ref = std::variant<std::string*, std::int32_t*, std::chrono::milliseconds*, bool*>;

value_kind kind_of(const field_ref& field);

/// A value as an error text shows it. A DSN's value is never shown, only its type: a password
/// could hide in any shape of value.
std::string show(const caf::config_value& value, std::string_view key);

/// Stores `value` through `field`, or throws troupe::error(invalid_argument) naming `key` when
/// it has the wrong type or range.
void assign(const field_ref& field, const caf::config_value& value, const std::string& key);

/// The limiters of a [limits] section (config/limits_section.cpp).
std::vector<limit> read_limits(const caf::settings& dict, const std::string& source);
/// The [limits] part of the reference file.
std::string limits_reference();
/// Adds a limiter table's keys to `out` (for all_options).
void append_limit_options(std::vector<option_info>& out);

/// Throws troupe::error(invalid_argument) with `what`.
[[noreturn]] void fail(const std::string& what);

/// Runs `check` and puts `key` in front of the text of the troupe::error it throws.
void with_key(std::string_view key, const std::function<void()>& check);

/// `text` as given, or through redact_dsn when it could hold a DSN password.
std::string without_password(const std::string& text);

/// Reads the merged tree of all sources into settings and validates them. Top-level keys for
/// which `is_caf_key` holds pass untouched; `source` names the INI file in errors about unknown
/// keys (only the file can hold those); `selection` is the --queues list, if given.
settings read_settings(const caf::settings& tree,
                       const std::function<bool(std::string_view)>& is_caf_key,
                       const std::string& source,
                       const std::optional<std::vector<std::string>>& selection);

} // namespace troupe::config::detail
