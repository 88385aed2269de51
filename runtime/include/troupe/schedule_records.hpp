// Schedules as the area stores them (migration 9; docs/scheduler.md): what a schedule publishes,
// when, and what its last occurrence did. Plain records, no behaviour: admin::create_schedule
// checks a schedule_spec and names what it refuses.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// What a schedule does with an occurrence while the message of its previous one is still
/// queued or running.
enum class overlap_policy {
  allow, ///< publishes it anyway (the default)
  skip,  ///< publishes nothing for it (its outcome reads "overlap")
};

/// What a schedule does with the occurrences that passed while no scheduler ran.
enum class catch_up_policy {
  /// One message for all of them, then the next occurrence after now (the default).
  coalesce,
  /// None: an occurrence found more than a minute late, or once a later one is due too, is
  /// dropped (its outcome reads "missed"), and the schedule waits for its next occurrence.
  none,
};

/// "allow" / "skip", "coalesce" / "none".
const char* to_string(overlap_policy p) noexcept;
const char* to_string(catch_up_policy p) noexcept;

/// A new schedule: a name unique in the area, the message each occurrence publishes, and either
/// a fixed interval or a cron expression.
struct schedule_spec {
  /// 1 to 200 bytes of UTF-8, no control characters.
  std::string name;
  /// The message: a registered task name, a valid queue name, arguments (a JSON array) and
  /// options (a JSON object), a priority.
  std::string task;
  std::string queue = "default";
  std::string args_json = "[]";
  std::string options_json = "{}";
  std::int32_t priority = 0;
  /// Every `interval` (1 ms on) on the grid of start_at: occurrences at start_at + k·interval.
  std::optional<std::chrono::milliseconds> interval;
  /// Or a cron expression (five fields, docs/scheduler.md) in `time_zone` (IANA name).
  std::string cron;
  std::string time_zone = "UTC";
  /// The first occurrence of an interval (by default the database's clock: due at once); for a
  /// cron expression, the first occurrence is the first match at or after it (default: now).
  std::optional<std::chrono::system_clock::time_point> start_at;
  bool enabled = true;
  overlap_policy overlap = overlap_policy::allow;
  catch_up_policy catch_up = catch_up_policy::coalesce;
  /// Each occurrence's message is delayed by a random time from 0 to `jitter` (at most a day).
  std::chrono::milliseconds jitter{0};
};

/// One schedule as stored, with what its last occurrence did.
struct schedule_record {
  std::string id; ///< a UUID
  std::string name;
  std::string task;
  std::string queue;
  /// The arguments and options: only from admin::schedule (show), never in a list.
  std::optional<std::string> args_json;
  std::optional<std::string> options_json;
  std::int32_t priority = 0;
  std::optional<std::int64_t> interval_ms;
  std::string cron;      ///< empty for an interval schedule
  std::string time_zone; ///< "UTC" for an interval schedule
  bool enabled = true;
  /// Unix time in milliseconds.
  std::int64_t start_at_ms = 0;
  std::int64_t next_run_ms = 0;
  overlap_policy overlap = overlap_policy::allow;
  catch_up_policy catch_up = catch_up_policy::coalesce;
  std::int64_t jitter_ms = 0;
  /// The last occurrence a scheduler handled, and what it did with it: "published", "overlap"
  /// (skipped: the previous message still queued or running), "missed" (dropped by catch-up
  /// none) or "failed" (its message was refused; `last_error` says why, and the schedule went
  /// on to its next occurrence). Empty before the first.
  std::optional<std::int64_t> last_occurrence_ms;
  std::string last_outcome;
  std::string last_error;
  /// The message of the last published occurrence, and its state now (empty when it is gone).
  std::string last_message_id;
  std::string last_message_state;
  /// How many occurrences it published.
  std::int64_t published = 0;
  std::int64_t created_at_ms = 0;
  /// The registered worker nodes (by name) whose registry holds the task: empty means no node
  /// runs it, and its messages would stay queued (show reports it).
  std::vector<std::string> registered_by;
};

/// What one scheduler tick did with one occurrence.
struct schedule_occurrence {
  std::string schedule;
  std::int64_t occurrence_ms = 0;
  /// "published", "overlap", "missed" or "failed".
  std::string outcome;
  std::string message_id; ///< when published
  std::string error;      ///< when failed: why
  std::int64_t next_run_ms = 0;
};

} // namespace troupe
