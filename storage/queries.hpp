// Typed calls of the named statements. Each runs on a connection the caller owns and throws
// troupe::error on failure; the storage actor, the listener, the client and the CLI all use
// these, so every piece of SQL has exactly one caller-facing form.
#pragma once

#include "storage/connection.hpp"
#include "storage/records.hpp"

#include <chrono>
#include <functional>
#include <span>

namespace troupe::storage {

/// The parameters of the enqueue_messages statement for `batch` (also run on callers' own
/// connections by transactional publishing).
params enqueue_params(const area& where, const std::vector<message>& batch, bool revive);
/// The parameters of insert_messages from those of enqueue_messages (all but the revive flag).
params insert_params(params enqueue_values);

/// The parameters of claim_deduplication_keys: one row per claim, and this call's token.
params claim_keys_params(const std::vector<key_claim>& claims, std::int64_t token);
/// The rows claim_deduplication_keys returned.
std::vector<key_claim_result> read_key_claims(const result& res);
/// The parameters of store_deduplicated_messages (claims holding the published messages).
params store_keys_params(const std::vector<key_claim>& claims, std::int64_t token);

/// Removes up to `limit` expired deduplication keys; returns how many.
std::int64_t prune_deduplication_keys(connection& conn, const statement_set& stmts,
                                      std::int64_t limit);

/// Inserts `batch` in one statement and wakes each queue once (delivered at commit). An existing
/// id is put back in its queue when `revive` holds (re-sending a message re-runs it); a retry
/// after a lost reply passes false so a message that already ran stays as it is. Returns the
/// rows written (inserted or put back).
std::int64_t enqueue_messages(connection& conn, const statement_set& stmts,
                              const std::vector<message>& batch, bool revive = true);

/// Writes `batch` (new ids, no delays) with a binary COPY in a transaction of its own that also
/// wakes each queue once. Nothing is written when it throws; an id that exists already fails
/// with SQLSTATE 23505 (then enqueue_messages is the way). Returns the rows written.
std::int64_t copy_new_messages(connection& conn, const statement_set& stmts,
                               const std::vector<message>& batch);

/// The binary COPY input of copy_messages for `batch`.
std::string copy_messages_data(std::span<const message> batch);

/// Claims up to `limit` ready messages of `queue` for `node_id`; when fewer than `eta_below`
/// came back (by default: none), also asks when the next delayed message is due. A `limit` of 0
/// claims nothing and only asks for the eta (if `eta_below` is positive).
claim_result claim_batch(connection& conn, const statement_set& stmts, const std::string& queue,
                         std::int32_t node_id, std::int32_t limit, std::int32_t eta_below = 1);

/// Claims like claim_batch, in two steps within one transaction, for a caller that starts the
/// messages as soon as it can: their rows are locked and read first, `locked` gets them (only
/// when there is at least one), and then they are marked running and the transaction commits.
/// The caller may start the messages from `locked` at once (no other claim can take them) but
/// must not write their outcomes before this returns: until the commit, a completion sees the
/// rows still queued and is refused. When this throws after `locked` was called, the claim was
/// rolled back, or (a lost connection) whether it committed is unknown. The result holds no
/// messages, only the eta when asked for. `starting` is the number of idle executors the
/// caller starts the first messages on at once: their start is written with the claim.
claim_result claim_batch_early(connection& conn, const statement_set& stmts,
                               const std::string& queue, std::int32_t node_id, std::int32_t limit,
                               std::int32_t eta_below, std::int32_t starting,
                               const std::function<void(std::vector<claimed_message>)>& locked);

/// Milliseconds until the earliest delayed message of `queue` is due, -1 when there is none.
std::int64_t next_eta(connection& conn, const statement_set& stmts, const std::string& queue);

/// Writes `outcomes` in one statement; returns how many were still owned and got written.
std::int64_t complete_batch(connection& conn, const statement_set& stmts, std::int32_t node_id,
                            const std::vector<outcome>& outcomes);

/// Puts claimed-but-never-started messages back; returns how many.
std::int64_t release_claimed(connection& conn, const statement_set& stmts, std::int32_t node_id,
                             const std::vector<claimed_message>& messages);

/// After a claim whose commit is unknown: first tells which of `started` (the messages of that
/// claim that started, at their attempts) it committed, once its transaction has ended; then
/// hands back every row node `node_id` owns in `queue` except `held_ids`.
recovery_result recover_unheld(connection& conn, const statement_set& stmts, std::int32_t node_id,
                               const std::string& queue, const std::vector<std::string>& held_ids,
                               const std::vector<claimed_message>& started);

/// The finished messages among `ids` (queued and running ones are left out).
std::vector<finished_message> read_results(connection& conn, const statement_set& stmts,
                                           const std::vector<std::string>& ids);
/// Whether a message with this id exists in the area.
bool message_exists(connection& conn, const statement_set& stmts, const std::string& id);

/// Per-queue statistics, for every queue with rows or for `only_queue`.
std::vector<troupe::queue_stats> queue_statistics(connection& conn, const statement_set& stmts,
                                                  const std::string* only_queue);

/// Every node in the registry, by id, with whether it holds its liveness lock now.
std::vector<troupe::node_status> list_nodes(connection& conn, const statement_set& stmts);

/// Registers a node and takes its liveness lock on `conn`; returns the node id.
std::int32_t register_node(connection& conn, const statement_set& stmts, const node_identity& who);
/// Takes node `node_id`'s lock again after a reconnect, restoring its row if it was removed;
/// returns whether it was (the node had been declared dead and its messages recovered).
bool reregister_node(connection& conn, const statement_set& stmts, const node_identity& who,
                     std::int32_t node_id);
/// Whether `conn`'s session holds node `node_id`'s liveness lock.
bool holds_node_lock(connection& conn, const statement_set& stmts, std::int32_t node_id);
/// Removes node `node_id` from the registry.
void deregister_node(connection& conn, const statement_set& stmts, std::int32_t node_id);

/// Sets up a listener's session: no idle timeout may end it (it holds a liveness lock), and a
/// lock wait is bounded.
void prepare_listener_session(connection& conn, const statement_set& stmts);
/// LISTENs on the area's wake channel (consumers' hints) or its results channel (result
/// waiters); the notifications then come from connection::wait_for_notifications.
void listen_for_wakes(connection& conn, const statement_set& stmts);
void listen_for_results(connection& conn, const statement_set& stmts);

/// One janitor pass: marks nodes whose liveness lock is free as suspect, removes those that
/// stayed so for `grace`, and recovers the messages they were running.
reap_report reap_dead_nodes(connection& conn, const statement_set& stmts,
                            std::chrono::milliseconds grace);

/// Vacuums the queue table (its indexes included) when PostgreSQL's statistics count at least
/// `min_dead` dead row versions in it plus 2 % of its live rows: every claim leaves one in the
/// fetch index, and later claims walk over them until a vacuum removes them. Skips at once
/// when another vacuum of the table (another node's, autovacuum) holds it. Returns the dead
/// versions counted when it vacuumed, -1 when it did not, and `vacuum_not_allowed` when this
/// role may not vacuum the table (it must own it, or the database). Not inside a transaction.
std::int64_t vacuum_queue(connection& conn, const statement_set& stmts, std::int64_t min_dead);
inline constexpr std::int64_t vacuum_not_allowed = -2;

} // namespace troupe::storage
