#include "actors/execute.hpp"

#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/json.hpp"
#include "troupe/limits.hpp"
#include "troupe/log.hpp"
#include "troupe/options.hpp"

#include <cxxabi.h>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <typeinfo>

namespace troupe::actors {

namespace {

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out) ? out : name;
  std::free(out);
  return result;
}

std::string utc_now_iso() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms.count());
}

// Records how the task itself ended in `a` (it never throws).
void run_task(attempt& a, std::string_view args_json) {
  try {
    a.result_json = a.task->invoke(a.context, args_json);
    if (!is_storable_json_text(a.result_json)) {
      a.status = attempt_status::failed;
      a.permanent = true;
      a.error_type = "troupe::result_not_storable";
      a.error_text = "the task's result holds text that is not valid UTF-8, or a NUL character, "
                     "which PostgreSQL cannot store";
      a.result_json.clear();
    }
    return;
  } catch (const error& e) {
    a.exception = std::current_exception();
    a.error_type = e.code() == errc::decode_failed ? "troupe::decode_failed" : "troupe::error";
    a.permanent = e.code() == errc::decode_failed;
    a.error_text = e.what();
    if (auto quote = a.task->options.quote_args_in_failures;
        e.code() == errc::decode_failed && quote > 0) {
      auto cut = std::min(quote, args_json.size());
      while (cut > 0 && cut < args_json.size() &&
             (static_cast<unsigned char>(args_json[cut]) & 0xc0) == 0x80)
        --cut; // not in the middle of a UTF-8 character
      a.error_text += fmt::format("; the arguments begin {}", args_json.substr(0, cut));
    }
  } catch (const std::exception& e) {
    a.exception = std::current_exception();
    a.error_type = demangle(typeid(e).name());
    a.error_text = e.what();
  } catch (...) {
    a.exception = std::current_exception();
    auto* type = abi::__cxa_current_exception_type();
    a.error_type = type ? demangle(type->name()) : "unknown";
    a.error_text = "non-standard exception";
  }
  a.status = attempt_status::failed;
}

// Runs one hook of every middleware in `order`; a hook that throws is logged and the others
// still run (a middleware bug must not lose the attempt's outcome).
template <class Range, class Hook>
void run_hooks(Range&& order, attempt& a, Hook hook) {
  for (const auto& m : order) {
    try {
      hook(*m, a);
    } catch (const std::exception& e) {
      log().error("middleware {} failed in a hook message={}: {}", m->name(), a.context.message_id,
                  e.what());
    } catch (...) {
      log().error("middleware {} failed in a hook message={}", m->name(), a.context.message_id);
    }
  }
}

// Whether a message's options make it a group member (a cheap look for the key first: most
// messages are not).
bool is_group_member(std::string_view options_json) {
  return options_json.find("\"group_id\"") != std::string_view::npos &&
         option_string(options_json, "group_id").has_value();
}

storage::outcome to_outcome(attempt& a) {
  storage::outcome o;
  o.id = a.context.message_id;
  o.attempt = a.context.attempt;
  // A group member's result is always kept: the group's results, and the step after it, read
  // it.
  bool keep_result =
    a.task &&
    (option_bool(a.context.options_json, "store_results").value_or(a.task->options.store_results) ||
     is_group_member(a.context.options_json));
  switch (a.status) {
  case attempt_status::done:
    o.state = storage::outcome_state::done;
    if (keep_result) {
      o.result_json = std::move(a.result_json);
      auto task_ttl = a.task->options.result_ttl.value_or(std::chrono::milliseconds{0}).count();
      o.result_ttl_ms = std::clamp<std::int64_t>(
        option_int(a.context.options_json, "result_ttl").value_or(task_ttl), 0,
        limits::max_option_ms);
    }
    break;
  case attempt_status::failed:
    o.state = a.retry ? storage::outcome_state::retry : storage::outcome_state::failed;
    // Bounded: a task's retry_after or a middleware may ask for any delay, and the eta the
    // queue table gets from it must stay a timestamp.
    o.retry_delay_ms = std::clamp<std::int64_t>(a.retry_delay.count(), 0, limits::max_delay_ms);
    o.error_json = failure_record(a.error_type, a.error_text, a.context.attempt);
    break;
  case attempt_status::skipped:
    o.state = storage::outcome_state::failed;
    o.error_json = failure_record(a.error_type, a.error_text, a.context.attempt, true);
    break;
  }
  for (auto& m : a.follow_ups)
    o.follow_ups.push_back(std::move(m));
  return o;
}

} // namespace

std::string failure_record(std::string_view type, std::string_view text, std::int32_t attempt,
                           bool skipped) {
  if (text.size() > max_failure_text) {
    // Cut on a UTF-8 character boundary.
    auto cut = max_failure_text;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80)
      --cut;
    text = text.substr(0, cut);
  }
  return fmt::format(R"({{"type":{},"text":{},"time":{},"attempt":{}{}}})", json_quote(type),
                     json_quote(text), json_quote(utc_now_iso()), attempt,
                     skipped ? R"(,"skipped":true)" : "");
}

std::chrono::milliseconds time_limit_of(const task_registry& registry,
                                        const storage::claimed_message& msg) {
  // Clamped: a row written by other means may hold any number here (its attempt fails on the
  // option, see execute), and no deadline or timer computed from it may overflow.
  if (auto v = option_int(msg.options_json, "time_limit"); v && *v > 0)
    return std::chrono::milliseconds{std::min(*v, limits::max_option_ms)};
  if (const auto* t = registry.find(msg.task); t && t->options.time_limit)
    return std::clamp(*t->options.time_limit, std::chrono::milliseconds{1},
                      std::chrono::milliseconds{limits::max_option_ms});
  return default_time_limit;
}

namespace {

task_context context_of(const storage::claimed_message& msg, const std::string& queue) {
  return task_context{msg.id,      queue,        msg.task,           msg.options_json,
                      msg.attempt, msg.priority, msg.enqueued_at_ms, msg.args_json};
}

} // namespace

storage::outcome lost_attempt(const task_registry& registry, const storage::claimed_message& msg,
                              const std::string& queue, const std::string& type,
                              const std::string& reason) {
  auto ctx = context_of(msg, queue);
  attempt a{ctx};
  a.task = registry.find(msg.task);
  a.registry = &registry;
  a.status = attempt_status::failed;
  a.error_type = type;
  a.error_text = reason;
  const auto& stack = registry.middleware();
  run_hooks(std::vector<middleware_ptr>(stack.rbegin(), stack.rend()), a,
            [](middleware& m, attempt& x) { m.after_process(x); });
  return to_outcome(a);
}

namespace {

storage::outcome execute_attempt(const task_registry& registry, const storage::claimed_message& msg,
                                 const std::string& queue, const std::atomic<bool>* shutting_down,
                                 const std::atomic<bool>* cancelled, progress_sink* progress,
                                 coordination_port* coordination,
                                 std::chrono::steady_clock::time_point began) {
  auto ctx = context_of(msg, queue);
  ctx.coordination = coordination;
  ctx.deadline = began + time_limit_of(registry, msg);
  ctx.shutting_down = shutting_down;
  ctx.cancel_flag = cancelled;
  ctx.progress = progress;
  attempt a{ctx};
  a.task = registry.find(msg.task);
  a.registry = &registry;
  a.previous_lost = msg.previous_lost;
  if (a.task)
    ctx.notify_shutdown =
      option_bool(msg.options_json, "notify_shutdown").value_or(a.task->options.notify_shutdown);
  const auto& stack = registry.middleware();
  // Options out of range (a row written into the queue by other means than Troupe's publish,
  // which refuses them) fail the attempt before any middleware reads them; after_process hooks
  // still see the failure.
  if (auto fault = limits::check_message_options(msg.options_json)) {
    a.status = attempt_status::failed;
    a.permanent = true;
    a.error_type = "troupe::invalid_options";
    a.error_text = "invalid message options: " + *fault;
  }
  // before_process in stack order; a skip stops the rest and runs after_skip of those entered,
  // a hook that fails the attempt stops the rest.
  std::size_t entered = a.status == attempt_status::failed ? stack.size() : 0;
  try {
    for (; entered < stack.size() && a.status != attempt_status::failed; ++entered)
      stack[entered]->before_process(a);
  } catch (const skip_attempt& skip) {
    a.status = attempt_status::skipped;
    a.error_type = skip.type;
    a.error_text = skip.reason;
    auto done = std::vector<middleware_ptr>(stack.begin(), stack.begin() + entered);
    run_hooks(std::vector<middleware_ptr>(done.rbegin(), done.rend()), a,
              [](middleware& m, attempt& x) { m.after_skip(x); });
    return to_outcome(a);
  } catch (const std::exception& e) {
    a.status = attempt_status::failed;
    a.error_type = "troupe::middleware_failed";
    a.error_text = std::string("a before_process hook failed: ") + e.what();
  } catch (...) {
    a.status = attempt_status::failed;
    a.error_type = "troupe::middleware_failed";
    a.error_text = "a before_process hook failed with a non-standard exception";
  }
  if (a.status != attempt_status::failed) {
    if (a.task == nullptr) {
      a.status = attempt_status::failed;
      a.permanent = true;
      a.error_type = "troupe::unknown_task";
      a.error_text = fmt::format("no task named \"{}\" is registered on this node", msg.task);
    } else {
      run_task(a, msg.args_json);
    }
  }
  run_hooks(std::vector<middleware_ptr>(stack.rbegin(), stack.rend()), a,
            [](middleware& m, attempt& x) { m.after_process(x); });
  return to_outcome(a);
}

} // namespace

storage::outcome execute(const task_registry& registry, const storage::claimed_message& msg,
                         const std::string& queue, const std::atomic<bool>* shutting_down,
                         const std::atomic<bool>* cancelled, progress_sink* progress,
                         coordination_port* coordination) {
  auto began = std::chrono::steady_clock::now();
  auto out =
    execute_attempt(registry, msg, queue, shutting_down, cancelled, progress, coordination, began);
  out.ran_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began)
      .count();
  return out;
}

} // namespace troupe::actors
