// When a schedule's occurrences fall (docs/scheduler.md): the grid of an interval, the matches
// of a cron expression, and the checks of a schedule_spec. Internal to Troupe: the admin API
// creates schedules with them, the scheduler moves schedules on with them.
#pragma once

#include "troupe/schedule_records.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::detail {

/// The longest interval and jitter a schedule takes.
inline constexpr std::int64_t max_interval_ms = 100LL * 366 * 24 * 3600 * 1000;
inline constexpr std::int64_t max_jitter_ms = 24LL * 3600 * 1000;
/// How late an occurrence may be found and still run under catch-up none.
inline constexpr std::int64_t catch_up_grace_ms = 60 * 1000;

/// When a schedule falls: a fixed interval, or a cron expression in a time zone.
struct cadence {
  std::optional<std::int64_t> interval_ms;
  std::string cron;
  std::string time_zone = "UTC";
};

/// Throws troupe::error(invalid_argument) naming what is wrong with `spec` (its name, task,
/// queue, arguments, options, interval or cron expression and time zone, jitter).
void validate_schedule_spec(const schedule_spec& spec);

/// The first occurrence at or after `start_ms`.
std::int64_t first_occurrence(const cadence& c, std::int64_t start_ms);

/// The first occurrence after `now_ms` (strictly), for a schedule whose occurrence
/// `occurrence_ms` (at or before now) is due: the next point of an interval's grid, or the next
/// cron match. The occurrences between are the ones a tick coalesces.
std::int64_t next_occurrence(const cadence& c, std::int64_t occurrence_ms, std::int64_t now_ms);

/// The `count` occurrences from `next_run_ms` on (show lists them).
std::vector<std::int64_t> upcoming(const cadence& c, std::int64_t next_run_ms, int count);

} // namespace troupe::detail
