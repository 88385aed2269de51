// Tasks: declared once with their typed signature (shared by producers and workers), defined
// with an implementation on the worker side, looked up by name when a message arrives.
//
//   inline const troupe::task_ref<int(int, int)> add{"add", "math"};   // shared header
//   client.enqueue(add(2, 3));                                         // producer
//   registry.define(add, [](int a, int b) { return a + b; });          // worker
#pragma once

#include "troupe/coordination.hpp"
#include "troupe/error.hpp"
#include "troupe/json.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"
#include "troupe/options.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace troupe {

/// Thrown by task_context::check() once the attempt's time limit has passed.
class time_limit_exceeded : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Thrown by task_context::check() when the node is stopping and the task asked to be told
/// (notify_shutdown).
class shutdown_requested : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Thrown by task_context::check() once the message's cancel was requested (`troupe cancel`,
/// admin::cancel). A task that lets it through fails its attempt, and the message is cancelled
/// instead of retried; a task that catches it (or reads cancel_requested()), cleans up and
/// returns completes normally.
class cancellation_requested : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Thrown by a task to be retried after `delay` instead of the retry backoff (Dramatiq's
/// `Retry(delay=...)`). Otherwise it is a failure like any other: never_retry_on and retry_when
/// apply, it uses up a retry, and when retries are exhausted the message fails (and
/// on_retry_exhausted follows) as for any failure. A negative delay counts as 0.
class retry_after : public std::runtime_error {
public:
  explicit retry_after(std::chrono::milliseconds delay,
                       const std::string& reason = "retry requested by the task")
      : std::runtime_error(reason),
        delay_(delay.count() < 0 ? std::chrono::milliseconds{0} : delay) {}

  /// The delay before the retry, never negative.
  std::chrono::milliseconds delay() const noexcept { return delay_; }

private:
  std::chrono::milliseconds delay_;
};

/// What never_retry_on and retry_when see for an attempt that was lost with its node (its
/// process ended while it ran): the retries middleware counts it as a failed attempt before the
/// next one starts (see "Poison messages" in docs/guide.md). Never thrown by Troupe.
class attempt_lost : public std::runtime_error {
public:
  attempt_lost() : std::runtime_error("the attempt's process ended while it ran") {}
};

/// Where a running task's progress goes (the node's; a task run outside a node has none, and
/// its reports go nowhere). Implementations take the value and never block for long.
class progress_sink {
public:
  /// `json` is valid JSON of at most limits::max_progress_bytes.
  virtual void report(std::string json) noexcept = 0;

protected:
  ~progress_sink() = default;
};

/// What a running task can know about its message, and how it learns that it should stop.
/// Owned by the executor running it.
struct task_context {
  std::string message_id;
  std::string queue;
  std::string task;
  std::string options_json;
  /// 1 for the first delivery, counted across retries and recoveries.
  std::int32_t attempt = 0;
  std::int32_t priority = 0;
  std::int64_t enqueued_at_ms = 0;
  /// The message's arguments, as published.
  std::string args_json;

  /// When the attempt's time limit runs out (steady clock); max() when it has none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Set by the node when it stops; only read when notify_shutdown holds.
  const std::atomic<bool>* shutting_down = nullptr;
  bool notify_shutdown = false;
  /// Set by the node when the message's cancel is requested (within a second of the request,
  /// on whichever node runs it).
  const std::atomic<bool>* cancel_flag = nullptr;

  /// Where set_progress() goes: set by the node.
  progress_sink* progress = nullptr;
  /// How limit_guard reaches the node's limiter actor: set by the node.
  coordination_port* coordination = nullptr;

  /// Reports how far the task is: a fraction from 0 to 1, or any JSON value (an object such as
  /// {"done": 40, "of": 120}) of at most limits::max_progress_bytes. The state record shows the
  /// latest value (`progress`): the node writes it once a second at most while the task runs,
  /// and with its outcome, so a task may report in a tight loop. Never throws and never fails
  /// the task (call it from the task's own thread): a fraction outside [0, 1], text that is
  /// not JSON, or a value too large is
  /// dropped with a warning (once per attempt); a write the database refuses is dropped too.
  void set_progress(double fraction) const noexcept;
  void set_progress(std::string_view json) const noexcept;
  /// Whether a dropped progress was warned about in this attempt (set_progress's).
  mutable bool progress_warned = false;

  /// Whether the message's cancel was requested while this attempt runs.
  bool cancel_requested() const noexcept { return cancel_flag && cancel_flag->load(); }
  /// Whether the task should stop now: its time limit passed, its cancel was requested, or the
  /// node is stopping and the task asked to be told. C++ cannot interrupt a thread: long tasks
  /// call this (or check()) between steps.
  bool stop_requested() const noexcept {
    return std::chrono::steady_clock::now() >= deadline || cancel_requested() ||
           (notify_shutdown && shutting_down && shutting_down->load());
  }
  /// Throws time_limit_exceeded, cancellation_requested or shutdown_requested when
  /// stop_requested() holds.
  void check() const {
    if (std::chrono::steady_clock::now() >= deadline)
      throw time_limit_exceeded("the task ran past its time limit");
    if (cancel_requested())
      throw cancellation_requested("the message's cancel was requested");
    if (notify_shutdown && shutting_down && shutting_down->load())
      throw shutdown_requested("the worker node is shutting down");
  }
};

/// What a callback receives about the message it follows (JSON object with these keys).
struct message_summary {
  std::string id;
  std::string queue;
  std::string task;
  std::string args_json;
  std::string options_json;
  std::int32_t attempt = 0;
  std::int64_t timestamp_ms = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("id", id), cereal::make_nvp("queue", queue), cereal::make_nvp("task", task),
       cereal::make_nvp("args", args_json), cereal::make_nvp("options", options_json),
       cereal::make_nvp("attempt", attempt), cereal::make_nvp("timestamp_ms", timestamp_ms));
  }
};

/// What an on_failure callback receives about the failed attempt: {"type", "message"} in JSON,
/// as Dramatiq passes it.
struct failure_info {
  std::string type;
  std::string message;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("type", type), cereal::make_nvp("message", message));
  }
};

/// What an on_retry_exhausted task receives besides the message.
struct retry_info {
  std::int32_t retries = 0;
  std::int32_t max_retries = 0;
  std::string type;
  std::string text;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("retries", retries), cereal::make_nvp("max_retries", max_retries),
       cereal::make_nvp("type", type), cereal::make_nvp("text", text));
  }
};

/// Per-task settings of the standard middleware. A message's own options (same names, times in
/// milliseconds) override them; unset ones take the middleware defaults.
struct task_options {
  /// Retries after the first attempt (default 20).
  std::optional<std::int32_t> max_retries;
  /// The first retry waits 1 to 2 times this (default 15 s), and each later retry twice as
  /// long as the one before (see retry_backoff).
  std::optional<std::chrono::milliseconds> min_backoff;
  /// Longest backoff (default 7 days, and never more): a longer delay is drawn from
  /// [max_backoff / 2, max_backoff] instead.
  std::optional<std::chrono::milliseconds> max_backoff;
  /// Decides whether to retry instead of max_retries: (retries so far, the exception). The
  /// exception pointer is null for attempts that ended without one (an
  /// attempt abandoned past its time limit).
  std::function<bool(std::int32_t, const std::exception_ptr&)> retry_when;
  /// Exceptions that are never retried (see never_retry_on); such a failure is final at once
  /// and does not trigger on_retry_exhausted.
  std::vector<std::function<bool(const std::exception_ptr&)>> never_retry;
  /// A task that receives (message_summary, retry_info) once retries are exhausted.
  std::string on_retry_exhausted;
  /// Skip the message when it is older than this at the start of an attempt (retries count).
  std::optional<std::chrono::milliseconds> max_age;
  /// Tasks that receive (message_summary, result JSON text) on success, and
  /// (message_summary, failure_info) on each failed attempt.
  std::string on_success;
  std::string on_failure;
  /// Keep the result in the message's row for get_result (default false).
  bool store_results = false;
  /// How long a stored result can be read (from the end of its attempt); unset, zero or
  /// negative: as long as its row is kept; more than a year counts as a year. Past it a read
  /// reports not_found and the janitor clears the result.
  std::optional<std::chrono::milliseconds> result_ttl;
  /// How long an attempt may run (default 10 minutes). Past it, check() throws; past it plus
  /// the node's time-limit grace, the attempt is abandoned (see docs/middleware.md).
  std::optional<std::chrono::milliseconds> time_limit;
  /// Let check() / stop_requested() report the node's shutdown to this task.
  bool notify_shutdown = false;
  /// How many bytes of the arguments the failure text of an attempt whose arguments do not
  /// decode quotes (troupe::decode_failed). 0, the default, quotes none: arguments can hold
  /// what must not reach a failure record or a log.
  std::size_t quote_args_in_failures = 0;
  /// Other queues this task's messages are sent to with message::on_queue. A worker node
  /// refuses to start with a queue that no registered task names, as its task's queue or here.
  std::vector<std::string> also_queues;

  /// Never retry when the task throws an `E` (or something derived from it).
  template <class E>
  task_options& never_retry_on() {
    never_retry.push_back([](const std::exception_ptr& p) {
      try {
        std::rethrow_exception(p);
      } catch (const E&) {
        return true;
      } catch (...) {
        return false;
      }
    });
    return *this;
  }
};

template <class Signature>
class task_ref;

/// A task's name, queue and typed signature. Calling it builds a message.
template <class R, class... Args>
class task_ref<R(Args...)> {
public:
  using result_type = R;

  task_ref(std::string name, std::string queue = "default")
      : name_(std::move(name)), queue_(std::move(queue)) {}
  /// A task whose every message runs under `limits` (enforced when a node claims it; see
  /// message::with_limits), and at most `per_key` at once per concurrency key (0: the
  /// message's own concurrency_limit, else 1). Throws troupe::error(invalid_argument) for a
  /// limit that breaks its rules or a negative per_key.
  task_ref(std::string name, std::string queue, std::vector<limit> limits, std::int32_t per_key = 0)
      : name_(std::move(name)), queue_(std::move(queue)), limits_(std::move(limits)),
        per_key_(per_key) {
    for (const auto& l : limits_)
      validate_limit(l);
    if (per_key_ < 0 || per_key_ > max_limit_capacity)
      throw error(errc::invalid_argument, "task " + name_ + ": per_key must be 0 to 1000000000");
  }

  const std::string& name() const noexcept { return name_; }
  const std::string& queue() const noexcept { return queue_; }
  const std::vector<limit>& limits() const noexcept { return limits_; }

  /// A message calling this task with `args`, on the task's queue, under the task's limits.
  message operator()(const std::decay_t<Args>&... args) const {
    auto m = make_message(queue_, name_, encode_args(args...));
    if (!limits_.empty())
      m.options_json = detail::with_limits_option(m.options_json, limits_);
    if (per_key_ > 0)
      m = m.with_concurrency_limit(per_key_);
    return m;
  }

private:
  std::string name_;
  std::string queue_;
  std::vector<limit> limits_;
  std::int32_t per_key_ = 0;
};

/// A registered task, type-erased: runs the implementation on JSON arguments and returns the
/// JSON result. Throws troupe::error(decode_failed) when the arguments do not fit, and lets the
/// task's own exceptions through.
struct task_entry {
  std::string name;
  std::string queue;
  std::function<std::string(task_context&, std::string_view args_json)> invoke;
  task_options options;
};

/// The tasks a worker node can run, by name. Filled before the node starts, then read-only.
class task_registry {
public:
  /// Registers `impl` for `ref`. `impl` takes the task's arguments, optionally preceded by a
  /// `task_context&`. Throws troupe::error(invalid_argument) when the name is taken.
  template <class R, class... Args, class F>
  void define(const task_ref<R(Args...)>& ref, F impl, task_options options = {}) {
    auto invoke = [impl = std::move(impl)](task_context& ctx,
                                           std::string_view json) mutable -> std::string {
      auto args = decode_args<std::decay_t<Args>...>(json);
      auto call = [&](auto&... xs) -> R {
        if constexpr (std::is_invocable_v<F&, task_context&, std::decay_t<Args>&...>)
          return impl(ctx, xs...);
        else
          return impl(xs...);
      };
      if constexpr (std::is_void_v<R>) {
        std::apply(call, args);
        return "null";
      } else {
        return encode_value(std::apply(call, args));
      }
    };
    add(task_entry{ref.name(), ref.queue(), std::move(invoke), std::move(options)});
  }

  /// Registers a type-erased entry. Throws troupe::error(invalid_argument) on a taken or
  /// empty name or an invalid queue name.
  void add(task_entry entry);

  /// The task called `name`, or nullptr.
  const task_entry* find(std::string_view name) const;

  /// The queues the registered tasks use (their own and their also_queues), sorted, without
  /// duplicates.
  std::vector<std::string> queues() const;
  /// The names of the tasks that use `queue`, sorted.
  std::vector<std::string> names_on(std::string_view queue) const;
  /// The names of the registered tasks, sorted.
  std::vector<std::string> names() const;

  std::size_t size() const noexcept { return by_name_.size(); }

  /// Adds a middleware after those already there (the standard stack comes first).
  void use(middleware_ptr m);
  /// Replaces the whole stack (an empty vector removes even the standard middleware).
  void set_middleware(std::vector<middleware_ptr> stack);
  const std::vector<middleware_ptr>& middleware() const noexcept { return middleware_; }

private:
  std::unordered_map<std::string, std::shared_ptr<task_entry>> by_name_;
  std::vector<middleware_ptr> middleware_ = standard_middleware();
};

} // namespace troupe
