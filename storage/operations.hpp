// Typed calls of the operations' statements (storage/sql/operations.sql): pausing queues,
// cancelling messages, failed messages and their retry, and what a worker node writes and
// reads to honour them. The admin API and the node's actors call these; each throws
// troupe::error. They need an area at migration 5 or later: callers check its version first.
#pragma once

#include "storage/connection.hpp"
#include "storage/records.hpp"
#include "troupe/admin_records.hpp"

#include <optional>
#include <string>
#include <vector>

namespace troupe::storage {

/// The transaction-scoped advisory lock a claim of `queue` holds shared and a pause of it
/// exclusively: a lock of its own per area and queue (one 64-bit key; node liveness locks and
/// the migration lock use two-key locks, which never clash with it).
std::int64_t pause_lock_key(const area& a, const std::string& queue);
/// The plain SQL a claim of `queue` runs first in its transaction, before its snapshot.
std::string claim_pause_gate_sql(const area& a, const std::string& queue);

/// Pauses or resumes `queue`. A pause waits for every claim of the queue in flight, and holds
/// off new ones until it commits: once it returns, no claim takes a message of the queue.
queue_control set_queue_paused(connection& conn, const statement_set& stmts,
                               const std::string& queue, bool paused);
/// The pause state of `queues`; with none, of every queue ever paused or resumed and every
/// queue a registered node consumes.
std::vector<queue_control> queue_control_status(connection& conn, const statement_set& stmts,
                                                const std::vector<std::string>& queues);

/// What a node must honour, from the control poll.
struct control_state {
  /// Of the node's queues, the paused ones.
  std::vector<std::string> paused;
  /// Messages the node holds whose cancel was requested: (queue, id).
  std::vector<std::pair<std::string, std::string>> cancels;
};
control_state control_poll(connection& conn, const statement_set& stmts, std::int32_t node_id,
                           const std::vector<std::string>& queues);

/// Writes the starts of `attempts`; returns how many rows took it.
std::int64_t mark_started(connection& conn, const statement_set& stmts, std::int32_t node_id,
                          const std::vector<started_attempt>& attempts);

/// Writes the starts of `attempts` that begin now, for messages marked confirm_start, and clears
/// the mark; returns the ids of the rows that took it (the node still owns them at that attempt).
std::vector<std::string> confirm_starts(connection& conn, const statement_set& stmts,
                                        std::int32_t node_id,
                                        const std::vector<started_attempt>& attempts);

/// Writes the progress of running attempts; returns how many rows took it.
std::int64_t write_progress(connection& conn, const statement_set& stmts, std::int32_t node_id,
                            const std::vector<progress_update>& updates);

cancel_report cancel_message(connection& conn, const statement_set& stmts, const std::string& id);
/// One pass of a cancel by filter, over at most `limit` rows.
cancel_counts cancel_matching(connection& conn, const statement_set& stmts,
                              const message_filter& filter, std::int32_t limit);
/// Whether a message that cancel_matching would change is left.
bool matching_left(connection& conn, const statement_set& stmts, const message_filter& filter);
cancel_state cancel_status(connection& conn, const statement_set& stmts, const std::string& id);

/// A page of failed messages, without their arguments and options.
failed_page failed_messages(connection& conn, const statement_set& stmts, const failed_query& q);
/// The failed message `id` with its payload; none when it is missing or not failed (`state`
/// then says which: empty, or the state it is in).
std::optional<failed_message> failed_message_by_id(connection& conn, const statement_set& stmts,
                                                   const std::string& id, std::string& state);

retry_report retry_message(connection& conn, const statement_set& stmts, const std::string& id);
/// One pass of a retry by filter, over at most `limit` rows that failed at or before `begun`
/// (database_now() when the command began); returns how many moved.
std::int64_t retry_matching(connection& conn, const statement_set& stmts,
                            const message_filter& filter, std::int32_t limit,
                            const std::string& begun);
/// The database's now(), as text.
std::string database_now(connection& conn, const statement_set& stmts);

/// One retention pass: up to `limit` rows of each state past its window, unless another node
/// purges at the same moment, and (migration 6) up to `limit` done and failed groups past the
/// window of their state. Returns how many rows and groups went.
std::int64_t purge_finished(connection& conn, const statement_set& stmts, const retention& r,
                            std::int32_t limit);
/// Clears up to `limit` stored results past their result_ttl; returns how many.
std::int64_t expire_results(connection& conn, const statement_set& stmts, std::int32_t limit);
/// The row of group `id` (canonical UUID text), if the area holds it (migration 6).
std::optional<group_row> read_group(connection& conn, const statement_set& stmts,
                                    const std::string& id);

/// One batch of `troupe purge`: up to `limit` finished rows of `states` older than `interval`
/// (PostgreSQL's interval syntax, checked positive first: invalid_argument otherwise).
std::int64_t purge_older(connection& conn, const statement_set& stmts,
                         const std::vector<std::string>& states, const std::string& interval,
                         std::int32_t limit);
/// One batch of `troupe flush`: up to `limit` queued messages of `queue`.
std::int64_t flush_queue(connection& conn, const statement_set& stmts, const std::string& queue,
                         std::int32_t limit);
/// The area's attempt history setting, and a change of it.
history_setting attempt_history_setting(connection& conn, const statement_set& stmts);
history_setting set_attempt_history(connection& conn, const statement_set& stmts, bool on);
/// A page of message `id`'s attempts after attempt id `after`, at most `limit`.
attempt_page attempt_history(connection& conn, const statement_set& stmts, const std::string& id,
                             std::optional<std::int64_t> after, std::int32_t limit);
/// One batch of `troupe history purge`: up to `limit` records older than `interval` (checked
/// positive first: invalid_argument otherwise).
std::int64_t purge_attempts(connection& conn, const statement_set& stmts,
                            const std::string& interval, std::int32_t limit);

/// The indexes a node needs that the area lacks (their names), for its warning at start.
std::vector<std::string> missing_indexes(connection& conn, const statement_set& stmts);

} // namespace troupe::storage
