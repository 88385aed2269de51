// The message envelope: one call of a named task with its arguments, addressed to a queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

struct limit; // troupe/coordination.hpp

/// A message as a producer builds it and as Troupe stores it. The id is a UUID (time-ordered,
/// version 7) fixed at construction, like the timestamp; both stay the same across retries.
struct message {
  std::string id;
  std::string queue = "default";
  std::string task;
  /// Positional arguments, one JSON array.
  std::string args_json = "[]";
  /// Open options map, one JSON object.
  std::string options_json = "{}";
  /// Lower runs first, across the whole queue.
  std::int32_t priority = 0;
  /// Earliest start, relative to the enqueue (measured by PostgreSQL's clock).
  std::int64_t delay_ms = 0;
  /// Unix time in milliseconds of construction.
  std::int64_t timestamp_ms = 0;

  /// This message with a delay.
  message with_delay(std::chrono::milliseconds d) const {
    auto copy = *this;
    copy.delay_ms = d.count();
    return copy;
  }
  /// This message with a priority.
  message with_priority(std::int32_t p) const {
    auto copy = *this;
    copy.priority = p;
    return copy;
  }
  /// This message on another queue.
  message on_queue(std::string q) const {
    auto copy = *this;
    copy.queue = std::move(q);
    return copy;
  }

  // Per-message options of the standard middleware (docs/middleware.md): each returns a copy
  // with one key of `options_json` set and the others kept, and overrides the task's option of
  // the same name for this message. Each throws troupe::error(invalid_argument) naming the
  // option and the value when the value is out of range, or when `options_json` is not a JSON
  // object.

  /// Retries after the first attempt (`max_retries`, 0 or more).
  message with_max_retries(std::int32_t retries) const;
  /// The backoff before the first retry (`min_backoff`, positive).
  message with_min_backoff(std::chrono::milliseconds backoff) const;
  /// The longest backoff (`max_backoff`, positive; more than 7 days counts as 7 days).
  message with_max_backoff(std::chrono::milliseconds backoff) const;
  /// Skip the message when it is older than this at the start of an attempt (`max_age`,
  /// positive).
  message with_max_age(std::chrono::milliseconds age) const;
  /// How long an attempt may run (`time_limit`, positive).
  message with_time_limit(std::chrono::milliseconds limit) const;
  /// The task to publish after a success (`on_success`). An empty name publishes none, even
  /// when the task names one.
  message with_on_success(std::string task) const;
  /// The task to publish after each failed attempt (`on_failure`); empty: none.
  message with_on_failure(std::string task) const;
  /// The task to publish once retries are exhausted (`on_retry_exhausted`); empty: none.
  message with_on_retry_exhausted(std::string task) const;
  /// Whether to keep the result for get_result (`store_results`).
  message with_store_results(bool store = true) const;
  /// How long its stored result can be read (`result_ttl`, positive).
  message with_result_ttl(std::chrono::milliseconds ttl) const;
  /// Whether the task is told that its node is stopping (`notify_shutdown`).
  message with_notify_shutdown(bool notify = true) const;

  // Coordination (migration 7, docs/coordination.md): limits the node enforces when it claims,
  // so that a message a limit holds back stays queued instead of taking an executor.

  /// The limiters this message runs under (`limits`, replacing any; troupe::concurrency,
  /// bucket, window from <troupe/coordination.hpp>). Each is checked (validate_limit).
  message with_limits(const std::vector<limit>& ls) const;
  /// Its concurrency key (`concurrency_key`): at most concurrency_limit (1 unless set) messages
  /// of this task with the same key run at once, across nodes, in claim order. Throws
  /// troupe::error(invalid_argument) for an empty key or one longer than 200 bytes.
  message with_concurrency_key(std::string key) const;
  /// How many messages of this task with one concurrency key may run at once
  /// (`concurrency_limit`, 1 to 1,000,000,000).
  message with_concurrency_limit(std::int32_t per_key) const;
};

/// A new message for `task` on `queue` with already-encoded arguments: a fresh id and timestamp.
/// Throws troupe::error(invalid_argument) for an invalid queue name or an empty task name.
message make_message(std::string queue, std::string task, std::string args_json);

/// Throws troupe::error(invalid_argument) naming what is wrong with `m` before it is published:
/// an invalid queue name, an id that is not a UUID, no task name, a negative delay.
void validate_message(const message& m);

/// validate_message, then `m`'s id in its canonical spelling (lower-case, hyphenated), as the
/// row, the task's context and notifications spell it: what every publish returns.
void normalize_message(message& m);

/// A fresh time-ordered UUID (version 7) in canonical lower-case text.
std::string new_message_id();

/// Whether `text` is a UUID in any accepted spelling; `canonical` receives the lower-case,
/// hyphenated form.
bool parse_uuid(std::string_view text, std::string& canonical);

/// Whether `text` is a UUID in any accepted spelling; `bytes` receives its 16 bytes.
bool parse_uuid_bytes(std::string_view text, unsigned char (&bytes)[16]);

} // namespace troupe
