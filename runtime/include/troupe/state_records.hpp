// The state record of a message and the queries over it (admin::get_state, get_states,
// get_states_count, `troupe states`). Plain records, no behaviour: the statuses, filters and
// sort columns are checked by the admin API, which names what it refuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// A message's state as an operator reads it: its status (docs/operations.md, "The state
/// record") and the three timestamps, from its row in the queue table.
///
///   pending    queued (ready or delayed, retries included), or claimed and not yet started
///   started    an executor began its current attempt
///   success    done
///   failure    failed (its retries used up, a non-retryable error, lost attempts, ...)
///   skipped    failed because a middleware skipped it before it ran (the age limit)
///   cancelled  cancelled
struct message_state {
  std::string message_id;
  std::string status;
  /// The row's state underneath: queued, running, done, failed or cancelled.
  std::string state;
  std::string queue;
  std::string task;
  std::int32_t priority = 0;
  /// Attempts started so far (docs/guide.md, "Started and attempts").
  std::int32_t attempts = 0;
  /// What the task last reported through task_context::set_progress (JSON), if anything.
  std::optional<std::string> progress_json;
  /// The failure record (JSON object: type, text, time, attempt), empty when there is none.
  std::string error_json;
  bool cancel_requested = false;
  /// Unix time in milliseconds: when it was published, when its current (or last) attempt
  /// started, when it finished.
  std::int64_t enqueued_at_ms = 0;
  std::optional<std::int64_t> started_at_ms;
  std::optional<std::int64_t> finished_at_ms;
  /// Only when asked for (state_query::payload, get_state's `payload`).
  std::optional<std::string> args_json;
  std::optional<std::string> options_json;
  /// The stored result (JSON) of a message that has one: read for one message (get_state), not
  /// for a page.
  std::optional<std::string> result_json;
};

/// Which messages a state query reads: every field given must match; empty lists match all.
struct state_filter {
  /// Among pending, started, success, failure, skipped, cancelled.
  std::vector<std::string> statuses;
  std::vector<std::string> tasks;
  std::vector<std::string> queues;
  /// Message ids (UUIDs).
  std::vector<std::string> message_ids;
  /// Bounds on when messages were published and when they finished, both inclusive: an ISO
  /// 8601 time or any timestamp PostgreSQL reads ("2026-12-01 12:00", "today"); a time without
  /// a zone is UTC. A finished bound leaves out messages that have not finished.
  std::optional<std::string> enqueued_from;
  std::optional<std::string> enqueued_to;
  std::optional<std::string> finished_from;
  std::optional<std::string> finished_to;
  /// Composition ids (UUIDs): every message of these pipelines and groups (their option
  /// `composition_id`, docs/composition.md).
  std::vector<std::string> composition_ids;
};

/// The order of a page: one column of the whitelist (message_id, status, queue, task,
/// priority, attempts, progress, enqueued_at, started_at, finished_at), either direction;
/// missing values sort last both ways, and ties go by message id in the same direction.
struct state_sort {
  std::string column = "enqueued_at";
  bool descending = true;
};

/// One page of a state query: `limit` rows (1 to 1,000) after the cursor `after` (the last
/// page's next_after, which only fits the same sort) or after skipping `offset` rows; not both.
struct state_query {
  state_filter filter;
  state_sort sort;
  std::int32_t limit = 50;
  std::optional<std::string> after;
  std::int64_t offset = 0;
  /// Include each message's arguments and options.
  bool payload = false;
  /// Include each message's stored result.
  bool result = false;
};

struct state_page {
  std::vector<message_state> items;
  /// The cursor of the next page when more may follow; none on the last page.
  std::optional<std::string> next_after;
};

} // namespace troupe
