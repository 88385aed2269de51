// The admin API: what an operator does to an area, in plain C++ (no CAF, no actor system).
// The `troupe` command goes through it, and users' own tools can too, so they share one
// implementation:
//
//   troupe::admin admin({"host=/run/postgresql dbname=app", troupe::area{}});
//   admin.init();                                  // create the area, or upgrade it
//   for (const auto& q : admin.stats()) ...        // per-queue counts
//
// Thread-safe: one connection, opened on first use (and again after a loss), behind a mutex.
#pragma once

#include "troupe/admin_records.hpp"
#include "troupe/area.hpp"
#include "troupe/schedule_records.hpp"
#include "troupe/state_records.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// Where the admin API works.
struct admin_options {
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  troupe::area area;
  /// How its sessions show up in pg_stat_activity.
  std::string application_name = "troupe-admin";
  /// Server warnings (not notices) go here when set, with their text; otherwise to the log.
  std::function<void(const std::string&)> on_warning;
};

/// Operations on one area. Every call throws troupe::error: invalid_argument for bad input
/// (before any SQL), not_found for an area that was never initialized (where the call needs
/// one), connection_lost and the others of the taxonomy from the database.
class admin {
public:
  /// Throws troupe::error(invalid_argument) for an invalid area or DSN; does not connect.
  explicit admin(admin_options options);
  ~admin();
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  const troupe::area& where() const noexcept;

  /// Creates the area, or applies the migrations it lacks: each in its own transaction under
  /// an advisory lock, so concurrent callers (several nodes' deployments) wait and then find
  /// nothing left to do. What `troupe init` runs.
  migration_report init();
  /// The same for an area that exists; not_found when it was never initialized.
  migration_report upgrade();
  /// The area's schema version: 0 when it was never initialized.
  int version();
  /// The newest schema version this Troupe knows.
  static int latest_version() noexcept;
  /// The SQL that brings area `where` from `from_version` (0: nothing) to the latest version,
  /// in one transaction, for users who run their own migrations. Needs no connection.
  static std::string migration_sql(const troupe::area& where, int from_version = 0);
  /// The GRANT statements that give `roles` what each needs on area `where` (at migration 5)
  /// and nothing more, in one transaction (docs/operations.md, "Least privilege"). The roles
  /// must exist; the area's owner runs the script. Needs no connection.
  static std::string grants_sql(const troupe::area& where, const area_roles& roles);

  /// Per-queue statistics: every queue with messages, or only `queue` (a valid queue name;
  /// zero counts when it has none). not_found when the area was never initialized.
  std::vector<queue_stats> stats(const std::optional<std::string>& queue = std::nullopt);
  /// Every queue with messages or a pause record, or exactly the queues of `only` (valid queue
  /// names; one without either reads zero): its statistics, whether it is paused, and how many
  /// of its messages failed for good within `failed_window` (1 s to 7 days). Read in one
  /// transaction, at a cost that follows the live messages and the recent failures, not the
  /// finished rows kept. Needs an area at version 5.
  std::vector<queue_overview> overview(const std::vector<std::string>& only = {},
                                       std::chrono::seconds failed_window = std::chrono::hours(1));
  /// Rebuilds the counts of done, failed and cancelled messages that stats() reads (version
  /// 5 on) from the rows, holding off completions, retries, cancels and purges while it counts
  /// (docs/operations.md, "Watching queues"). timeout when a transaction that changes them
  /// stays open past `lock_wait`. Returns how many (queue, state) counts there are.
  std::int64_t recount_stats(std::chrono::milliseconds lock_wait = std::chrono::seconds(5));

  /// The worker nodes in the area's registry, by id. not_found when the area was never
  /// initialized.
  std::vector<node_status> nodes();
  /// Waits up to `timeout` until at least `count` live nodes consume `queue` (any queue when
  /// empty), checking every 100 ms; returns whether they did (not_found when the area was
  /// never initialized). For deployments and tests that
  /// must not publish before a node is there (a node spawned in the same process can tell
  /// directly: worker_node::ready(), or a ready_atom request to its actor).
  bool wait_for_nodes(const std::string& queue, std::size_t count,
                      std::chrono::milliseconds timeout);

  // -- operations (areas at version 5 or later; invalid_argument for an older one) ---------

  /// Pauses `queue` in the area: publishing goes on, no node claims or starts its messages
  /// (running ones finish, prefetched ones go back with their eta and retries intact). Returns
  /// once every claim of the queue in flight has ended: from then on nothing is claimed, and
  /// each node stops what it prefetched within a second. Persistent and idempotent.
  queue_control pause(const std::string& queue);
  /// Resumes `queue` (idempotent); its consumers claim at once.
  queue_control resume(const std::string& queue);
  /// Whether each queue is paused: `queue` alone, or every queue ever paused or resumed and
  /// every queue a registered node consumes.
  std::vector<queue_control> queue_status(const std::optional<std::string>& queue = std::nullopt);

  /// Cancels message `id` (a UUID). A queued or delayed message is cancelled now and never
  /// starts. A message a node holds has its cancel requested: its node cancels it if it has not
  /// started it, and otherwise tells its task within a second (task_context::cancel_requested());
  /// if that attempt fails, the message is cancelled, not retried. Finished messages are left
  /// alone (terminal). Idempotent. Result waiters see task_cancelled.
  cancel_report cancel(const std::string& id);
  /// Cancels every message that `filter` matches (states among queued and running; empty: both)
  /// in batches of 1,000, until none is left that it can change.
  cancel_counts cancel_matching(const message_filter& filter);
  /// Message `id`'s state and whether its cancel was requested (state empty when missing).
  cancel_state cancel_status(const std::string& id);

  /// A page of failed messages, in message-id order (`query.limit` 1 to 1,000), without their
  /// arguments and options.
  failed_page failed(const failed_query& query = {});
  /// The failed message `id` with its arguments and options; not_found when it is missing or
  /// not failed (the error says which state it is in).
  failed_message show_failed(const std::string& id);
  /// Puts failed message `id` back in its queue, due now, with a fresh retry budget and no
  /// failure record or result (same id, task, arguments and options). Anything else is left
  /// as it is (the report says why). Concurrent retries make one transition.
  retry_report retry(const std::string& id);
  /// Retries every failed message that `filter` matches (its states are ignored); returns how
  /// many went back.
  std::int64_t retry_matching(const message_filter& filter);

  // -- the state record (docs/operations.md, "The state record") ----------------------------

  /// Message `id`'s state (with its arguments and options when `payload`), or none when no
  /// message has that id.
  std::optional<message_state> get_state(const std::string& id, bool payload = false);
  /// One page of the states that `query.filter` matches, in `query.sort` order. invalid_argument
  /// names a bad status, sort column, limit, offset, cursor or time bound.
  state_page get_states(const state_query& query = {});
  /// How many messages `filter` matches.
  std::int64_t get_states_count(const state_filter& filter = {});

  // -- attempt history (docs/operations.md, "Attempt history") -----------------------------

  /// Whether the area keeps attempt history (off until turned on).
  history_setting attempt_history();
  /// Turns it on or off for the whole area: nodes follow from their next completion.
  /// Idempotent.
  history_setting set_attempt_history(bool on);
  /// A page of message `id`'s attempts (`limit` 1 to 1,000) after attempt id `after`. An id
  /// without records gives an empty page.
  attempt_page history(const std::string& id, std::optional<std::int64_t> after = std::nullopt,
                       std::int32_t limit = 50);
  /// Deletes the attempt records that started longer ago than `max_age` (a positive PostgreSQL
  /// interval), incomplete ones too, in batches of 10,000; returns how many went. The queue's
  /// rows are left as they are.
  std::int64_t purge_history(const std::string& max_age);

  // -- schedules (areas at version 9 or later; docs/scheduler.md) ---------------------------

  /// Creates schedule `spec` (checked first: invalid_argument names the bad field) and returns
  /// it as stored. constraint_violated when the name is taken: nothing is overwritten.
  schedule_record create_schedule(const schedule_spec& spec);
  /// Every schedule, by name, without arguments or options.
  std::vector<schedule_record> schedules();
  /// Schedule `name` with its arguments and options, or none.
  std::optional<schedule_record> schedule(const std::string& name);
  /// The next `count` occurrences (1 to 100) of schedule `name` from its next run on; not_found
  /// when it does not exist.
  std::vector<std::int64_t> upcoming_runs(const std::string& name, int count = 5);
  /// Enables or disables schedule `name`; whether it exists (idempotent). Waits for a tick
  /// that holds it. An enabled schedule whose occurrences passed while it was disabled follows
  /// its catch-up policy at the next tick.
  bool enable_schedule(const std::string& name);
  bool disable_schedule(const std::string& name);
  /// Deletes schedule `name`; whether it existed. Messages it published stay.
  bool delete_schedule(const std::string& name);

  // -- retention and maintenance --------------------------------------------------------

  /// Deletes finished rows (of `states`, among done, failed and cancelled; empty: all three)
  /// that finished longer ago than `older_than` (a PostgreSQL interval, such as "30 days"),
  /// oldest first, in batches of 10,000; `progress` (when set) gets the running total after
  /// each batch. Returns how many went. Results, failure records and the rows' state records
  /// go with them; deduplication keys stay until they expire.
  std::int64_t purge(const std::string& older_than, const std::vector<std::string>& states = {},
                     const std::function<void(std::int64_t)>& progress = {});
  /// Puts the messages of nodes that are dead now (their liveness lock is free) back in their
  /// queues at once, without waiting for the grace a janitor gives them; a node whose listener
  /// is reconnecting counts as dead too. Returns what the janitor pass found.
  recover_report recover();
  /// Deletes every queued message (ready or delayed) of `queue`, in batches; running ones are
  /// left alone. Returns how many went.
  std::int64_t flush(const std::string& queue);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
