// Cron expressions (five fields or a macro) read in an IANA time zone, and the rule that turns
// one into its next firing instant. Pure computation: no clock, no database, no CAF.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace troupe {

/// A cron expression (five fields) in an IANA time zone, immutable, cheap to copy.
///
/// Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or jan..dec), day of
/// week (0-7 or sun..sat, 0 and 7 both Sunday). Each field is a comma list of `*`, `n`, `a-b`,
/// `*/s`, `a-b/s` or `a/s` (a up to the field's maximum); names are case-insensitive. When both
/// day fields are restricted (neither starts with `*`) a day matches if either matches; otherwise
/// both must. Macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
///
/// Times are matched on the zone's local wall clock at minute resolution. A matching local time
/// that falls in a daylight-saving gap fires once at the end of the gap; one that occurs twice
/// fires once, at its first occurrence.
class cron_schedule {
public:
  using time_point = std::chrono::system_clock::time_point;

  /// Parses `expression` in `time_zone` ("UTC" by default; any name of the system's tz database,
  /// e.g. "Europe/Berlin"). Throws troupe::error(errc::invalid_argument) naming what is wrong.
  static cron_schedule parse(std::string_view expression, std::string_view time_zone = "UTC");

  /// The first occurrence strictly after `after`.
  time_point next_after(time_point after) const;

  /// The expression as given, without leading and trailing whitespace.
  const std::string& expression() const noexcept;

  /// The time zone name as given.
  const std::string& time_zone() const noexcept;

private:
  struct impl;

  explicit cron_schedule(std::shared_ptr<const impl> state);

  std::shared_ptr<const impl> impl_;
};

} // namespace troupe
