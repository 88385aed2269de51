// The schedules of migration 9 (docs/scheduler.md): the admin calls on them, and the two
// statements of a scheduler's tick, which the caller runs in one transaction of its own.
#pragma once

#include "storage/connection.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"
#include "troupe/schedule_records.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::storage {

/// The first schema version with schedules (and with the task names of each node).
inline constexpr int schedules_version = 9;

/// The refusal of schedules on an area at `version` (below schedules_version), naming the
/// upgrade.
error schedules_missing(int version);

/// The database's clock, in Unix milliseconds.
std::int64_t database_clock_ms(connection& conn, const statement_set& stmts);

/// Inserts `spec` (checked by the caller) starting at `start_ms`, first due at `next_run_ms`.
/// Its id, or none when the name is taken (nothing is overwritten).
std::optional<std::string> create_schedule(connection& conn, const statement_set& stmts,
                                           const schedule_spec& spec, std::int64_t start_ms,
                                           std::int64_t next_run_ms);
/// Every schedule by name (or the one called `name`), with arguments and options only when
/// `payload`.
std::vector<schedule_record> list_schedules(connection& conn, const statement_set& stmts,
                                            bool payload,
                                            const std::optional<std::string>& name = std::nullopt);
/// Enables or disables schedule `name`; whether it exists.
bool set_schedule_enabled(connection& conn, const statement_set& stmts, const std::string& name,
                          bool enabled);
/// Deletes schedule `name`; whether it existed.
bool delete_schedule(connection& conn, const statement_set& stmts, const std::string& name);

/// A due schedule as a tick locked it.
struct due_schedule {
  std::string id;
  std::string name;
  std::string task;
  std::string queue;
  std::string args_json;
  std::string options_json;
  std::int32_t priority = 0;
  std::optional<std::int64_t> interval_ms;
  std::string cron;
  std::string time_zone;
  std::int64_t occurrence_ms = 0;
  overlap_policy overlap = overlap_policy::allow;
  catch_up_policy catch_up = catch_up_policy::coalesce;
  std::int64_t jitter_ms = 0;
  /// The occurrence as UTC ISO-8601 (milliseconds), and the message id derived from the
  /// schedule's id and it.
  std::string occurrence_text;
  std::string message_id;
  /// Whether the message of its last published occurrence is still queued or running.
  bool previous_active = false;
};

/// Locks up to `limit` enabled schedules due at `now_ms`, earliest first, skipping the ones
/// another transaction holds. Runs inside the caller's transaction.
std::vector<due_schedule> lock_due_schedules(connection& conn, const statement_set& stmts,
                                             std::int64_t now_ms, std::int32_t limit);
/// Records what the tick did with schedule `id`'s due occurrence and moves it on to
/// `next_run_ms`. Inside the same transaction.
void advance_schedule(connection& conn, const statement_set& stmts, const std::string& id,
                      std::int64_t next_run_ms, const std::string& outcome,
                      const std::optional<std::string>& message_id,
                      const std::optional<std::string>& failure = std::nullopt);

/// A savepoint before one occurrence's publish, so that a message the database refuses fails
/// that occurrence alone (rolled back to it), not the whole tick: set, released, rolled back.
void occurrence_savepoint(connection& conn);
void release_occurrence_savepoint(connection& conn);
void rollback_to_occurrence_savepoint(connection& conn);

} // namespace troupe::storage
