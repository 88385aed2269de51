// Running one attempt of a claimed message: find the task, decode its arguments, call it, and
// turn whatever happens into an outcome. No exception ever leaves; no CAF here.
#pragma once

#include "storage/records.hpp"
#include "troupe/task.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

namespace troupe::actors {

/// The longest failure text kept in a failure record.
inline constexpr std::size_t max_failure_text = 2000;

/// A failure record as stored with the message: {"type", "text" (at most 2,000 bytes, cut on
/// a character boundary), "time" (UTC, ISO 8601), "attempt"}, plus "skipped": true when a
/// middleware skipped the attempt (age limit).
std::string failure_record(std::string_view type, std::string_view text, std::int32_t attempt,
                           bool skipped = false);

/// Runs `msg` with the tasks and the middleware of `registry`: before_process hooks, the task,
/// after_process hooks in reverse order. Unknown tasks and undecodable arguments become failed
/// outcomes whose record names the reason (never retried); a task's exception becomes a failed
/// outcome with the exception's type and text, which the retries middleware may turn into a
/// retry. Follow-up messages (callbacks) travel with the outcome. The result is kept only when
/// the task (or message) asks to store results.
/// `shutting_down` and `cancelled` are the node's stop flag and this attempt's cancel flag
/// (task_context), `progress` where its set_progress() goes. The outcome's ran_ms is how long
/// the attempt took.
storage::outcome execute(const task_registry& registry, const storage::claimed_message& msg,
                         const std::string& queue, const std::atomic<bool>* shutting_down = nullptr,
                         const std::atomic<bool>* cancelled = nullptr,
                         progress_sink* progress = nullptr,
                         coordination_port* coordination = nullptr);

/// The default time limit of an attempt (Dramatiq's): 10 minutes.
inline constexpr std::chrono::milliseconds default_time_limit{600'000};

/// The time limit of an attempt of `msg`: the message's time_limit option, else the task's,
/// else the default.
std::chrono::milliseconds time_limit_of(const task_registry& registry,
                                        const storage::claimed_message& msg);

/// The outcome of an attempt that ended without its executor reporting one (it was abandoned
/// past its time limit): a failure of type `type` that the
/// after_process hooks see like any failure, so the retry policy and callbacks apply.
storage::outcome lost_attempt(const task_registry& registry, const storage::claimed_message& msg,
                              const std::string& queue, const std::string& type,
                              const std::string& reason);

} // namespace troupe::actors
