// Middleware: code that runs around every publish and every attempt, in a fixed order. The
// standard middleware (age limit, retries, callbacks) is written against this interface like
// any user middleware; a task registry starts with the standard stack and `use()` adds more.
//
// Order: before_* hooks run in stack order, after_* hooks in reverse stack order (the first
// middleware wraps all the others). Process hooks run on the executor's thread, next to the
// task; they may block briefly but must not throw except where a hook says so.
#pragma once

#include "troupe/message.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

struct task_context;
struct task_entry;
class task_registry;

/// How an attempt ends, as the middleware shape it.
enum class attempt_status : std::uint8_t {
  done,    ///< the task returned; `result_json` holds its result
  failed,  ///< the task threw, or could not run; `error_type`/`error_text` say why
  skipped, ///< a middleware skipped it before it ran (`error_*` say why); it is not retried
};

/// One attempt of one message, passed through every process hook.
struct attempt {
  explicit attempt(task_context& ctx) : context(ctx) {}

  task_context& context;
  /// The task, or nullptr when no task of that name is registered.
  const task_entry* task = nullptr;
  /// The node's tasks (to address follow-ups to the right queue).
  const task_registry* registry = nullptr;
  /// A failure no retry can mend (unknown task, undecodable arguments).
  bool permanent = false;
  /// The attempt before this one started and was lost with its node (its process ended while
  /// it ran): the retries middleware counts it as a failure of type troupe::attempt_lost.
  bool previous_lost = false;
  attempt_status status = attempt_status::done;
  std::string result_json;
  /// Failure details: the exception's type name and text (or Troupe's own reason).
  std::string error_type;
  std::string error_text;
  /// The exception the task threw, for predicates that look at its type.
  std::exception_ptr exception;
  /// Set by the retries middleware: the message goes back to its queue after this delay (the
  /// backoff, or what the task asked for by throwing retry_after).
  bool retry = false;
  std::chrono::milliseconds retry_delay{0};
  /// Messages to publish when, and only when, this attempt's outcome is written (callbacks,
  /// retry-exhausted handlers): in the same transaction as the outcome.
  std::vector<message> follow_ups;
};

/// Thrown by a before_process hook to skip the attempt (the task does not run).
struct skip_attempt {
  std::string type;
  std::string reason;
};

/// Where a node runs (for node_start / node_stop).
struct node_info {
  std::int32_t node_id = 0;
  std::string name;
};

/// The base of every middleware. Every hook does nothing by default.
class middleware {
public:
  virtual ~middleware() = default;

  /// A short name, for logs.
  virtual std::string name() const = 0;

  /// Before a message is published; may change it (options, delay). Throwing refuses the
  /// publish. With transactional publishing these describe the SQL, not the commit.
  virtual void before_enqueue(message&) {}
  /// After a message was published.
  virtual void after_enqueue(const message&) {}

  /// Before the task runs. Throw skip_attempt to skip it; set `status` to failed (with
  /// `error_type` and `error_text`) to fail it without running (the hooks after it are not
  /// called, after_process hooks are).
  virtual void before_process(attempt&) {}
  /// After the task ran (or failed to): may change how the attempt ends (retry, follow-ups).
  virtual void after_process(attempt&) {}
  /// After a before_process hook skipped the attempt.
  virtual void after_skip(attempt&) {}

  /// When a worker node has started, and when it stops.
  virtual void node_start(const node_info&) {}
  virtual void node_stop(const node_info&) {}
};

using middleware_ptr = std::shared_ptr<middleware>;

/// The standard stack, in order: age limit, retries, callbacks, pipelines.
std::vector<middleware_ptr> standard_middleware();

/// The longest backoff: a longer max_backoff (message or task option) counts as this, 7 days.
inline constexpr std::chrono::milliseconds longest_retry_backoff{7LL * 24 * 3600 * 1000};

/// The retries middleware's delay before the next retry of a message that has been retried
/// `retries` times so far (0 before the first retry), Dramatiq's schedule: a uniform draw in
/// [min_backoff * 2^r, min_backoff * 2^(r+1)] with r = `retries` capped at 32. A draw above
/// `max_backoff` (itself capped at longest_retry_backoff) is replaced by a uniform draw in
/// [max_backoff / 2, max_backoff]. Whole milliseconds; negative arguments count as 0.
std::chrono::milliseconds retry_backoff(std::int32_t retries, std::chrono::milliseconds min_backoff,
                                        std::chrono::milliseconds max_backoff);

} // namespace troupe
