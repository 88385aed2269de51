// Tasks: declared once with their typed signature (shared by producers and workers), defined
// with an implementation on the worker side, looked up by name when a message arrives.
//
//   inline const troupe::task_ref<int(int, int)> add{"add", "math"};   // shared header
//   client.enqueue(add(2, 3));                                         // producer
//   registry.define(add, [](int a, int b) { return a + b; });          // worker
#pragma once

#include "troupe/json.hpp"
#include "troupe/message.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace troupe {

/// What a running task can know about its message. Owned by the executor running it.
struct task_context {
  std::string message_id;
  std::string queue;
  std::string task;
  std::string options_json;
  /// 1 for the first delivery, counted across retries and recoveries.
  std::int32_t attempt = 0;
  std::int32_t priority = 0;
  std::int64_t enqueued_at_ms = 0;
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

  const std::string& name() const noexcept { return name_; }
  const std::string& queue() const noexcept { return queue_; }

  /// A message calling this task with `args`, on the task's queue.
  message operator()(const std::decay_t<Args>&... args) const {
    return make_message(queue_, name_, encode_args(args...));
  }

private:
  std::string name_;
  std::string queue_;
};

/// A registered task, type-erased: runs the implementation on JSON arguments and returns the
/// JSON result. Throws troupe::error(decode_failed) when the arguments do not fit, and lets the
/// task's own exceptions through.
struct task_entry {
  std::string name;
  std::string queue;
  std::function<std::string(task_context&, std::string_view args_json)> invoke;
};

/// The tasks a worker node can run, by name. Filled before the node starts, then read-only.
class task_registry {
public:
  /// Registers `impl` for `ref`. `impl` takes the task's arguments, optionally preceded by a
  /// `task_context&`. Throws troupe::error(invalid_argument) when the name is taken.
  template <class R, class... Args, class F>
  void define(const task_ref<R(Args...)>& ref, F impl) {
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
    add(task_entry{ref.name(), ref.queue(), std::move(invoke)});
  }

  /// Registers a type-erased entry. Throws troupe::error(invalid_argument) on a taken or
  /// empty name or an invalid queue name.
  void add(task_entry entry);

  /// The task called `name`, or nullptr.
  const task_entry* find(std::string_view name) const;

  /// The queues the registered tasks use, sorted, without duplicates.
  std::vector<std::string> queues() const;

  std::size_t size() const noexcept { return by_name_.size(); }

private:
  std::unordered_map<std::string, std::shared_ptr<task_entry>> by_name_;
};

} // namespace troupe
