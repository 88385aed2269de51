// The plain values that cross the storage boundary besides the shared base's (troupe::message
// is what is published, troupe/admin_records.hpp what the admin API reads): outcomes written,
// messages claimed, key claims, janitor reports. No CAF and no libpq here; the actors' protocol
// header adds their inspect functions.
#pragma once

#include "troupe/admin_records.hpp"
#include "troupe/message.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::storage {

/// A deduplication key to claim for a message about to be published. `message_json` is the
/// message as it will be returned to duplicate publishers.
struct key_claim {
  std::string queue;
  std::string key;
  std::string message_id;
  std::string message_json;
  std::int64_t ttl_ms = 0;
};

/// What claiming a key found: `claimed` when this call took it (free or expired), otherwise the
/// message that holds it.
struct key_claim_result {
  std::string queue;
  std::string key;
  bool claimed = false;
  message holder;
};

/// A message as one claim returned it. `attempt` is the delivery token of this claim.
struct claimed_message {
  std::string id;
  std::string task;
  std::string args_json;
  std::string options_json;
  std::int32_t attempt = 0;
  std::int32_t priority = 0;
  std::int64_t enqueued_at_ms = 0;
  /// Unix time in milliseconds at which the message became ready (its eta).
  std::int64_t eta_ms = 0;
  /// The number of the consumer's claim that brought it (0 outside a node's consumer).
  std::uint64_t claim = 0;
  /// The message came back from a node that died holding it: its start is written before its
  /// task runs (storage::confirm_starts), so that a task that ends its process is counted.
  bool confirm_start = false;
  /// Its last attempt started and was lost with its node: it counts against max_retries.
  bool previous_lost = false;
};

/// Where an attempt leaves its message.
enum class outcome_state : std::uint8_t {
  done,     ///< finished; `result_json` holds the result (or is empty for none)
  failed,   ///< finished for good; `error_json` holds the failure record
  retry,    ///< back to the queue after `retry_delay_ms`; `error_json` holds the failure
  cancelled ///< finished without running
};

/// The SQL spelling of an outcome's target state.
const char* to_sql(outcome_state s) noexcept;

/// The result of one attempt, written by the completion batcher.
struct outcome {
  std::string id;
  std::int32_t attempt = 0;
  outcome_state state = outcome_state::done;
  std::string result_json; ///< empty: SQL NULL
  std::string error_json;  ///< empty: SQL NULL
  std::int64_t retry_delay_ms = 0;
  /// How long the attempt ran, in milliseconds; negative for a message that never started (a
  /// cancel before its start). A row whose start was not written yet gets it from this.
  std::int64_t ran_ms = 0;
  /// The progress the task reported last that its node has not written (JSON); empty: none.
  std::string progress_json;
  /// How long a stored result lives (result_ttl, ms); 0: as long as its row.
  std::int64_t result_ttl_ms = 0;
  /// Messages published in the same transaction as this outcome, only if it is written.
  std::vector<message> follow_ups;
};

/// An attempt that started and still runs, whose start its node writes (mark_started).
struct started_attempt {
  std::string id;
  /// The claim's attempt (the delivery token).
  std::int32_t attempt = 0;
  /// How long it has run.
  std::int64_t elapsed_ms = 0;
};

/// The progress of an attempt that still runs, for its node to write (write_progress).
struct progress_update {
  std::string id;
  /// The claim's attempt (the delivery token).
  std::int32_t attempt = 0;
  std::string progress_json;
};

/// A group's row (migration 6).
struct group_row {
  std::string id;
  std::string state; ///< running, done or failed
  std::int32_t total = 0;
  std::int32_t succeeded = 0;
  std::int32_t failed = 0;
  std::string error_json; ///< empty while no member failed
  std::int64_t created_at_ms = 0;
  std::int64_t finished_at_ms = 0; ///< 0 while it runs
};

/// Retention windows per finished state, in milliseconds; 0 keeps that state's rows.
struct retention {
  std::int64_t done_ms = 0;
  std::int64_t failed_ms = 0;
  std::int64_t cancelled_ms = 0;
};

/// One claim's answer: the messages, and when the next delayed one becomes ready.
struct claim_result {
  std::vector<claimed_message> messages;
  /// Milliseconds until the earliest delayed message is due; negative when none is known.
  std::int64_t next_eta_ms = -1;
};

/// What a recovery after a failed claim did (storage::recover_unheld).
struct recovery_result {
  /// Rows the node owned in the queue and its consumer did not hold, handed back.
  std::int64_t handed_back = 0;
  /// Of the started messages of a claim whose commit is unknown, those it did commit: the rows
  /// are running, owned by the node, at the claim's attempt. The others' outcomes must never
  /// be written.
  std::vector<std::string> committed;
};

/// How a message ended, as a result reader sees it.
struct finished_message {
  std::string id;
  std::string state;       ///< done, failed or cancelled
  std::string result_json; ///< empty when none was stored
  std::string error_json;  ///< empty when none
  /// Its stored result passed its result_ttl (result_json is then empty).
  bool result_expired = false;
};

/// What one janitor pass found.
struct reap_report {
  std::int64_t dead_nodes = 0;
  std::int64_t recovered = 0;
  std::vector<std::string> queues;
  /// Nodes whose lock was first seen free in this pass, and nodes whose lock came back.
  std::int64_t suspect_nodes = 0;
  std::int64_t cleared_nodes = 0;
  /// Expired deduplication keys removed in this pass.
  std::int64_t pruned_keys = 0;
};

/// How a node describes itself in the nodes registry.
struct node_identity {
  std::string name;
  std::string host;
  std::int32_t pid = 0;
  std::vector<std::string> queues;
  std::vector<std::string> tasks; // the task names it registered (recorded from migration 9 on)
};

} // namespace troupe::storage
