// The plain records the admin API returns (troupe/admin.hpp). Part of the shared base: storage
// reads them from the database, and the CLI, the dashboard and users' tools print them. No
// behaviour here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// How many messages of one queue are in each state (`troupe stats`).
struct queue_stats {
  std::string queue;
  std::int64_t queued = 0;
  std::int64_t running = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  /// Queued messages whose eta has passed, and those still waiting for it.
  std::int64_t ready = 0;
  std::int64_t scheduled = 0;
  /// How long the oldest ready message has waited since its eta; 0 when none is ready.
  double oldest_ready_seconds = 0;
};

/// One queue as the exporter and the dashboard show it (admin::overview): its counts, whether
/// it is paused, and how many of its messages failed for good recently.
struct queue_overview {
  queue_stats stats;
  bool paused = false;
  /// Messages that failed for good within the window asked for.
  std::int64_t failed_recently = 0;
};

/// A worker node in the area's registry.
struct node_status {
  std::int32_t node_id = 0;
  std::string name;
  std::string host;
  std::int32_t pid = 0;
  /// The queues it consumes.
  std::vector<std::string> queues;
  /// Unix time in milliseconds of its registration.
  std::int64_t started_at_ms = 0;
  /// Whether it holds its liveness lock now (a node whose session ended does not).
  bool alive = false;
  /// Messages it holds: started (running now), and claimed but not started yet (prefetched).
  std::int64_t running = 0;
  std::int64_t prefetched = 0;
};

/// What creating or upgrading an area did.
struct migration_report {
  /// The area's version before and after.
  int from_version = 0;
  int to_version = 0;
  /// The migrations applied, in order; empty when the area was up to date.
  std::vector<int> applied;
};

/// Whether a queue is paused (`troupe pause`, `resume`, `queue-status`).
struct queue_control {
  std::string queue;
  bool paused = false;
  /// Unix time in milliseconds of the last pause or resume that changed it; none when the queue
  /// was never paused.
  std::optional<std::int64_t> changed_at_ms;
};

/// What a cancel found (`troupe cancel`).
enum class cancel_outcome {
  /// No message has that id.
  missing,
  /// The message was queued (ready or delayed) and is cancelled now, or was cancelled already.
  cancelled,
  /// The message is held by a node: its cancel is requested. The node cancels it before it
  /// starts, or tells its task (task_context::cancel_requested()).
  requested,
  /// The message had finished (done or failed): nothing changed.
  terminal,
};

/// The stable name of a cancel outcome, as the CLI prints it: missing, cancelled, requested,
/// terminal.
const char* to_string(cancel_outcome o) noexcept;

struct cancel_report {
  std::string message_id;
  cancel_outcome outcome = cancel_outcome::missing;
  /// The row's state after the cancel (queued, running, done, failed, cancelled); empty when
  /// missing.
  std::string state;
};

/// A message's state and whether its cancel was requested (`troupe cancel-status`).
struct cancel_state {
  std::string message_id;
  /// Empty when no message has that id.
  std::string state;
  bool requested = false;
};

/// Which messages an operation by filter (cancel, retry) takes: every field set must match.
struct message_filter {
  std::optional<std::string> queue;
  std::optional<std::string> task;
  /// For cancels: the states to cancel, among "queued" and "running" (empty: both).
  std::vector<std::string> states;
};

/// What a cancel by filter did.
struct cancel_counts {
  /// Queued messages cancelled, and running ones whose cancel was requested.
  std::int64_t cancelled = 0;
  std::int64_t requested = 0;
};

/// A failed message (`troupe failed list` and `failed show`). Arguments and options only when
/// asked for.
struct failed_message {
  std::string message_id;
  std::string queue;
  std::string task;
  /// Attempts started (the last one failed, or was lost).
  std::int32_t attempts = 0;
  std::int32_t priority = 0;
  /// The failure record (JSON object: type, text, time, attempt), or empty.
  std::string error_json;
  std::int64_t enqueued_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  std::optional<std::string> args_json;
  std::optional<std::string> options_json;
};

/// Which failed messages to list, and the page.
struct failed_query {
  std::optional<std::string> queue;
  std::optional<std::string> task;
  /// 1 to 1,000.
  std::int32_t limit = 50;
  /// The cursor: list the ids after this one (the last page's next_after).
  std::optional<std::string> after;
};

/// One page of failed messages, in message-id order.
struct failed_page {
  std::vector<failed_message> items;
  /// The cursor of the next page (the last id of this one) when more may follow; none on the
  /// last page.
  std::optional<std::string> next_after;
};

/// What a retry of a failed message did (`troupe retry`).
enum class retry_outcome {
  /// Back in its queue, due now.
  retried,
  /// No message has that id.
  missing,
  /// The message is not failed (queued, running, done, cancelled): nothing changed.
  not_failed,
};

const char* to_string(retry_outcome o) noexcept;

struct retry_report {
  std::string message_id;
  retry_outcome outcome = retry_outcome::missing;
  /// The row's state after (queued when retried); empty when missing.
  std::string state;
};

/// Whether the area keeps attempt history (`troupe history enable|disable|status`).
struct history_setting {
  bool enabled = false;
  /// Unix time in milliseconds of the last change (the area's creation when never changed).
  std::int64_t changed_at_ms = 0;
};

/// One started execution of a message (`troupe history list`). Never arguments or results.
struct attempt_record {
  /// Increasing in the order the records were written; none for the attempt that runs now
  /// (it has no record until it ends: the message's row shows it, last in the list).
  std::optional<std::int64_t> attempt_id;
  std::string message_id;
  /// The message's attempt number (task_context::attempt).
  std::int32_t attempt = 0;
  std::string queue;
  std::string task;
  std::optional<std::int32_t> node_id;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> finished_at_ms;
  /// success, failure (the message may have been retried), cancelled, or incomplete (no
  /// finish: it runs now, or its node died during it).
  std::string outcome = "incomplete";
  /// The failure's type and text (at most 2,000 characters), empty when none.
  std::string error_type;
  std::string error_text;
  std::optional<std::int64_t> duration_ms;
};

/// One page of a message's attempts, in attempt-id order.
struct attempt_page {
  std::vector<attempt_record> items;
  /// The cursor of the next page (the last attempt id) when more may follow; none on the last.
  std::optional<std::int64_t> next_after;
};

/// The roles of an area's least-privilege grants (`troupe sql grants`); an empty name gets none.
struct area_roles {
  /// Publishes and reads results.
  std::string producer;
  /// Runs a worker node.
  std::string node;
  /// Runs the `troupe` verbs that change rows (pause, cancel, retry, purge, ...), not init or
  /// upgrade.
  std::string operator_role;
};

/// What `troupe recover` did.
struct recover_report {
  /// Nodes found dead and removed, and the messages they held put back (or cancelled).
  std::int64_t dead_nodes = 0;
  std::int64_t recovered = 0;
};

} // namespace troupe
