// What the `troupe` command prints: the text and JSON forms of its reports, as pure functions
// of plain values (no connection), so their format can be tested on its own.
#pragma once

#include "troupe/admin_records.hpp"
#include "troupe/area.hpp"
#include "troupe/schedule_records.hpp"
#include "troupe/state_records.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::cli {

/// `text` for a terminal: control characters (newlines, escape sequences) written as \\n or
/// \\xNN, so that no value from the database can forge a line or drive the terminal.
std::string terminal_safe(std::string_view text);

/// `schema troupe (prefix "")`: how messages name an area.
std::string describe_area(const area& a);

/// Same, but the prefix only when it is not empty: `schema troupe`.
std::string describe_area_short(const area& a);

/// Seconds rounded to milliseconds, in the shortest plain decimal form (`0`, `1.2`, `3600`);
/// negative or non-finite values print as `0`. Valid JSON number and readable text.
std::string format_seconds(double seconds);

/// One block per queue: `queue NAME`, then `  state: count` lines, blocks separated by an empty
/// line; `no queues with messages` when `stats` is empty.
std::string format_stats_text(const std::vector<queue_stats>& stats);

/// `{"queues":[{"queue":..,"counts":{..},"ready":..,"scheduled":..,"oldest_ready_seconds":..}]}`
/// on one line.
std::string format_stats_json(const std::vector<queue_stats>& stats);

/// `{"schema":..,"prefix":..,["from":A,]"version":B,"applied":[..]}` on one line; `from` only
/// when given (upgrade).
std::string format_migration_json(const area& a, std::optional<int> from, int version,
                                  const std::vector<int>& applied);

// -- the operations' reports (cli/operations_output.cpp), each one JSON object on one line ---

/// Unix milliseconds as an ISO 8601 UTC time with milliseconds ("2026-12-02T03:04:05.678Z").
std::string iso_time(std::int64_t unix_ms);

/// `{"queue":..,"paused":..,"changed_at":ISO or null}`.
std::string format_queue_control_json(const queue_control& q);
/// `{"queues":[...]}` of those objects.
std::string format_queue_controls_json(const std::vector<queue_control>& qs);
/// `{"message_id":..,"status":"cancelled|requested|terminal|missing","state":.. or null}`.
std::string format_cancel_json(const cancel_report& r);
/// `{"cancelled":N,"requested":M}`.
std::string format_cancel_counts_json(const cancel_counts& c);
/// `{"message_id":..,"state":.. or null,"requested":bool}`.
std::string format_cancel_state_json(const cancel_state& s);
/// `{"items":[...],"next_after":id or null}`: each item as format_failed_json's object.
std::string format_failed_page_json(const failed_page& page);
/// `{"message_id","queue","task","priority","attempts","retries","error":{..} or null,
/// "enqueued_at","finished_at"}` plus "args" and "options" when the message holds them.
std::string format_failed_json(const failed_message& m);
/// `{"message_id":..,"status":"retried|not_failed|missing","state":.. or null}`.
std::string format_retry_json(const retry_report& r);

// -- records printed by several verbs and by the dashboard's API (dashboard/) ---------------

/// One state record (cli/states_command.cpp): `{"message_id","status","state","queue","task",
/// "priority","attempts","progress","error","cancel_requested","enqueued_at","started_at",
/// "finished_at"}` plus "args", "options" and "result" when it holds them.
std::string format_state_json(const message_state& m);
/// `{"items":[attempt...],"next_after":N or null}` (cli/history_command.cpp).
std::string format_attempt_page_json(const attempt_page& page);
/// One schedule (cli/schedule_command.cpp); with its arguments (`show`) it adds "next_runs"
/// (`runs`) and "warnings".
std::string format_schedule_json(const schedule_record& s,
                                 const std::vector<std::int64_t>& runs = {});

} // namespace troupe::cli
