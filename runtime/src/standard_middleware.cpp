// The standard middleware: age limit, retries, callbacks, pipelines. Each reads a message option
// first, then the task's option, then its own default.
#include "pipeline_steps.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/middleware.hpp"
#include "troupe/options.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <random>

namespace troupe {

namespace {

using namespace std::chrono;

std::int64_t unix_ms() {
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

message_summary summarize(const attempt& a) {
  const auto& c = a.context;
  return message_summary{c.message_id,   c.queue,   c.task,          c.args_json,
                         c.options_json, c.attempt, c.enqueued_at_ms};
}

// A follow-up message for task `name`, on that task's queue when this node knows it, else on
// the queue of the message it follows.
message follow_up(const attempt& a, const std::string& name, std::string args_json) {
  const task_entry* target = a.registry ? a.registry->find(name) : nullptr;
  auto queue = target ? target->queue : a.context.queue;
  return make_message(std::move(queue), name, std::move(args_json));
}

std::string string_option(const attempt& a, std::string_view key, const std::string& task_value) {
  if (auto v = option_string(a.context.options_json, key))
    return *v;
  return task_value;
}

template <class T>
T duration_option(const attempt& a, std::string_view key, const std::optional<T>& task_value,
                  T fallback) {
  if (auto v = option_int(a.context.options_json, key); v && *v > 0)
    return T{*v};
  return task_value ? *task_value : fallback;
}

/// Skips a message older than max_age (since its first publish, retries included).
class age_limit final : public middleware {
public:
  std::string name() const override { return "age_limit"; }

  void before_process(attempt& a) override {
    if (!a.task)
      return;
    auto max_age = duration_option(a, "max_age", a.task->options.max_age, milliseconds{0});
    if (max_age.count() <= 0)
      return;
    auto age = unix_ms() - a.context.enqueued_at_ms;
    if (age > max_age.count())
      throw skip_attempt{"troupe::age_limit_exceeded",
                         fmt::format("the message is {}ms old, older than its max_age of {}ms", age,
                                     max_age.count())};
  }
};

// The delay a task asked for by throwing troupe::retry_after, if it did.
std::optional<milliseconds> requested_delay(const std::exception_ptr& e) {
  if (!e)
    return std::nullopt;
  try {
    std::rethrow_exception(e);
  } catch (const retry_after& r) {
    return r.delay();
  } catch (...) {
    return std::nullopt;
  }
}

/// Puts a failed message back with exponential backoff (or the delay the task asked for with
/// retry_after) until its retries are used up.
class retries final : public middleware {
public:
  static constexpr std::int32_t default_max_retries = 20;
  static constexpr milliseconds default_min_backoff{15'000};
  static constexpr milliseconds default_max_backoff = longest_retry_backoff;

  std::string name() const override { return "retries"; }

  // An attempt lost with its node counts as a failed attempt: when the one before this one was
  // lost and would not have been retried had it failed, this one does not run.
  void before_process(attempt& a) override {
    if (!a.previous_lost || !a.task)
      return;
    auto lost = std::make_exception_ptr(attempt_lost{});
    auto retries_before = std::max(0, a.context.attempt - 2);
    if (would_retry(a, retries_before, lost))
      return;
    a.status = attempt_status::failed;
    a.error_type = poison_type;
    a.error_text = fmt::format(
      "attempt {} was lost with its node (the process ended while it ran), and lost attempts "
      "count against max_retries={}: attempt {} does not run",
      a.context.attempt - 1, max_retries_of(a), a.context.attempt);
  }

  void after_process(attempt& a) override {
    if (a.status != attempt_status::failed || a.permanent || !a.task)
      return;
    const auto& opts = a.task->options;
    auto retries_so_far = std::max(0, a.context.attempt - 1);
    bool poisoned = a.error_type == poison_type && !a.exception;
    if (!poisoned && would_retry(a, retries_so_far, a.exception)) {
      a.retry = true;
      if (auto asked = requested_delay(a.exception)) {
        a.retry_delay = *asked;
        return;
      }
      auto min_b = duration_option(a, "min_backoff", opts.min_backoff, default_min_backoff);
      auto max_b = duration_option(a, "max_backoff", opts.max_backoff, default_max_backoff);
      a.retry_delay = retry_backoff(retries_so_far, min_b, max_b);
      return;
    }
    if (!poisoned && is_never_retried(a, a.exception))
      return;
    auto exhausted = string_option(a, "on_retry_exhausted", opts.on_retry_exhausted);
    if (!exhausted.empty())
      a.follow_ups.push_back(
        follow_up(a, exhausted,
                  encode_args(summarize(a), retry_info{retries_so_far, max_retries_of(a),
                                                       a.error_type, a.error_text})));
  }

private:
  static constexpr const char* poison_type = "troupe::poison_message";

  static std::int32_t max_retries_of(const attempt& a) {
    std::int32_t max_retries = a.task->options.max_retries.value_or(default_max_retries);
    if (auto v = option_int(a.context.options_json, "max_retries"); v && *v >= 0)
      max_retries = static_cast<std::int32_t>(
        std::min<std::int64_t>(*v, std::numeric_limits<std::int32_t>::max()));
    return max_retries;
  }
  static bool is_never_retried(const attempt& a, const std::exception_ptr& e) {
    if (e)
      for (const auto& never : a.task->options.never_retry)
        if (never(e))
          return true;
    return false;
  }
  // Whether a failure `e` after `retries_so_far` retries goes back to the queue.
  static bool would_retry(const attempt& a, std::int32_t retries_so_far,
                          const std::exception_ptr& e) {
    if (is_never_retried(a, e))
      return false;
    const auto& opts = a.task->options;
    return opts.retry_when ? opts.retry_when(retries_so_far, e)
                           : retries_so_far < max_retries_of(a);
  }
};

/// Publishes on_success / on_failure callbacks with the outcome they follow.
class callbacks final : public middleware {
public:
  std::string name() const override { return "callbacks"; }

  void after_process(attempt& a) override {
    if (!a.task)
      return;
    if (a.status == attempt_status::done) {
      auto target = string_option(a, "on_success", a.task->options.on_success);
      if (!target.empty())
        a.follow_ups.push_back(follow_up(a, target, encode_args(summarize(a), a.result_json)));
    } else if (a.status == attempt_status::failed) {
      auto target = string_option(a, "on_failure", a.task->options.on_failure);
      if (!target.empty())
        a.follow_ups.push_back(follow_up(
          a, target, encode_args(summarize(a), failure_info{a.error_type, a.error_text})));
    }
  }
};

/// Publishes a pipeline's next step (the message's pipe_target: a message, or a group's members)
/// after a success, with the result appended to the arguments of each unless it says
/// pipe_ignore (runtime/src/pipeline.cpp).
class pipelines final : public middleware {
public:
  std::string name() const override { return "pipelines"; }

  void after_process(attempt& a) override {
    if (a.status != attempt_status::done)
      return;
    for (auto& next : detail::next_steps(a.context.options_json, a.result_json))
      a.follow_ups.push_back(std::move(next));
  }
};

} // namespace

std::vector<middleware_ptr> standard_middleware() {
  return {std::make_shared<age_limit>(), std::make_shared<retries>(), std::make_shared<callbacks>(),
          std::make_shared<pipelines>()};
}

std::chrono::milliseconds retry_backoff(std::int32_t retries, std::chrono::milliseconds min_backoff,
                                        std::chrono::milliseconds max_backoff) {
  // Dramatiq's schedule: b = min_backoff * 2^min(retries, 32), then b * U(1, 2); a draw above
  // max_backoff is replaced by max_backoff * U(0.5, 1). In whole milliseconds.
  constexpr std::int32_t max_exponent = 32;
  constexpr std::int64_t saturated = std::numeric_limits<std::int64_t>::max();
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto max_b = std::clamp<std::int64_t>(max_backoff.count(), 0, longest_retry_backoff.count());
  auto min_b = std::max<std::int64_t>(min_backoff.count(), 0);
  auto exponent = std::clamp(retries, 0, max_exponent);
  auto low = min_b > (saturated >> exponent) ? saturated : min_b << exponent;
  if (low <= max_b) {
    // 2 * low <= 2 * max_b, far from overflowing (max_b is at most 7 days).
    std::uniform_int_distribution<std::int64_t> doubled(low, 2 * low);
    if (auto b = doubled(rng); b <= max_b)
      return std::chrono::milliseconds{b};
  }
  std::uniform_int_distribution<std::int64_t> capped((max_b + 1) / 2, max_b);
  return std::chrono::milliseconds{capped(rng)};
}

} // namespace troupe
