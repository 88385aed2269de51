// Compositions of messages. A pipeline runs its steps one after the other, each step's result
// appended to the next step's arguments (unless that step says pipe_ignore):
//
//   auto p = troupe::pipeline({shop::fetch(order), shop::price(), shop::bill()});
//   p.run(client);
//   int cents = client.get_result<int>(p.last(), true);
//
// The next step is published in the transaction that writes its predecessor's completion, so it
// exists exactly once, whichever node ran the step; a failed step publishes nothing after it.
// docs/composition.md.
#pragma once

#include "troupe/client.hpp"
#include "troupe/json.hpp"
#include "troupe/message.hpp"
#include "troupe/task.hpp"
#include "troupe/transactional.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace troupe {

/// What a typed step takes from the step before it: `void` for a first step, `ignored` for a
/// step that takes nothing from it (pipe_ignore), else the type of its last argument.
struct ignored {};

/// A pipeline step whose types the pipeline checks at compile time: its message, what its task
/// returns (R) and what it takes from its predecessor (From). Built by start, then and
/// then_ignore.
template <class R, class From>
struct typed_step {
  message m;
};

namespace detail {

template <class... Ts>
using last_t = typename decltype((std::type_identity<Ts>{}, ...))::type;

template <class Tuple, class... Given, std::size_t... I>
constexpr bool given_fit(std::index_sequence<I...>) {
  return (std::is_convertible_v<const Given&, std::decay_t<std::tuple_element_t<I, Tuple>>> && ...);
}

template <class Prev, class... Steps>
struct links_fit : std::true_type {};
template <class Prev, class R, class From, class... Rest>
struct links_fit<Prev, typed_step<R, From>, Rest...>
    : std::bool_constant<(std::is_same_v<From, ignored> ||
                          (!std::is_void_v<From> && !std::is_void_v<Prev> &&
                           std::is_convertible_v<Prev, From>)) &&
                         links_fit<R, Rest...>::value> {};

} // namespace detail

/// A first step: `t` called with all its arguments.
template <class R, class... Args, class... Given>
typed_step<R, void> start(const task_ref<R(Args...)>& t, const Given&... args) {
  static_assert(sizeof...(Given) == sizeof...(Args), "start() takes every argument of the task");
  return {t(args...)};
}

/// A later step: `t` called with all its arguments but the last, which is its predecessor's
/// result.
template <class R, class... Args, class... Given>
typed_step<R, std::decay_t<detail::last_t<Args...>>> then(const task_ref<R(Args...)>& t,
                                                          const Given&... args) {
  static_assert(sizeof...(Given) + 1 == sizeof...(Args),
                "then() takes every argument of the task but the last, which is the result of "
                "the step before it");
  static_assert(
    detail::given_fit<std::tuple<Args...>, Given...>(std::index_sequence_for<Given...>{}),
    "then(): an argument does not fit the task's signature");
  return {make_message(t.queue(), t.name(), encode_args(args...))};
}

/// A later step that takes nothing from its predecessor (pipe_ignore): `t` with all its
/// arguments.
template <class R, class... Args, class... Given>
typed_step<R, ignored> then_ignore(const task_ref<R(Args...)>& t, const Given&... args) {
  static_assert(sizeof...(Given) == sizeof...(Args),
                "then_ignore() takes every argument of the task");
  auto m = t(args...);
  m.options_json = with_option(m.options_json, "pipe_ignore", true);
  return {std::move(m)};
}

/// The most steps a pipeline may have (each step carries the ones after it in its options).
inline constexpr std::size_t max_pipeline_steps = 100;

class pipeline {
public:
  /// The steps, in order, each with its own id, queue, delay and options. Every step gets the
  /// option `composition_id` (the pipeline's id, the first step's id). Throws
  /// troupe::error(invalid_argument) for no step, more than max_pipeline_steps, a step that is
  /// not a valid message, or two steps with one id.
  explicit pipeline(std::vector<message> steps);

  /// A pipeline whose links C++ checks: each step after the first takes its predecessor's
  /// result type as its last argument (then) or takes nothing from it (then_ignore); anything
  /// else does not compile.
  ///   troupe::pipeline p(troupe::start(add, 1, 2), troupe::then(twice), troupe::then(twice));
  template <class R, class... Steps>
  explicit pipeline(typed_step<R, void> first, Steps... rest)
      : pipeline(std::vector<message>{std::move(first.m), std::move(rest.m)...}) {
    static_assert(detail::links_fit<R, Steps...>::value,
                  "a pipeline step takes what the step before it returns (then), or nothing "
                  "from it (then_ignore)");
  }

  /// The pipeline's id: every step carries it as its `composition_id` option.
  const std::string& id() const noexcept { return id_; }
  /// The steps as built (their ids are the ids of the messages the pipeline publishes).
  const std::vector<message>& steps() const noexcept { return steps_; }
  const message& last() const { return steps_.back(); }
  /// The first step, carrying the others in its options (`pipe_target`): the one message that
  /// publishing the pipeline writes.
  const message& first() const noexcept { return first_; }

  /// Publishes the pipeline (its first step) through `c`; returns the first step as published.
  message run(client& c, const enqueue_options& options = {}) const;
  /// Publishes it inside the caller's transaction on `conn` (enqueue_in_transaction): it
  /// exists only if that transaction commits.
  message run_in_transaction(pg_conn* conn, const area& where,
                             const enqueue_options& options = {}) const;

  /// The last step's result JSON (client::get_result_json of last()).
  std::string get_result_json(client& c, bool block = false,
                              std::chrono::milliseconds timeout = default_result_timeout) const;
  /// Each step's result JSON, in order; blocking waits up to `timeout` for each in turn.
  std::vector<std::string>
  get_results_json(client& c, bool block = false,
                   std::chrono::milliseconds timeout = default_result_timeout) const;
  /// How many steps, from the first, have a result that can be read now (steps whose tasks do
  /// not store results never count).
  std::size_t completed_count(client& c) const;

private:
  std::string id_;
  std::vector<message> steps_;
  message first_;
};

/// `m` with option `pipe_ignore`: as a pipeline step, it does not receive its predecessor's
/// result.
message pipe_ignore(message m);

} // namespace troupe
