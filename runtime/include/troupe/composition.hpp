// Compositions of messages. A pipeline runs its steps one after the other, each step's result
// appended to the next step's arguments (unless that step says pipe_ignore); a group runs its
// members side by side, with callbacks once all have succeeded:
//
//   auto p = troupe::pipeline({shop::fetch(order), shop::price(), shop::bill()});
//   p.run(client);
//   int cents = client.get_result<int>(p.last(), true);
//
//   troupe::group g({shop::price(1), shop::price(2)});
//   g.on_success(shop::report());
//   g.run(client);
//
// The next step is published in the transaction that writes its predecessor's completion, so it
// exists exactly once, whichever node ran the step; a failed step publishes nothing after it.
// A group's callbacks are published in the transaction of its last member's completion.
// docs/composition.md.
#pragma once

#include "troupe/client.hpp"
#include "troupe/json.hpp"
#include "troupe/message.hpp"
#include "troupe/task.hpp"
#include "troupe/transactional.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
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
/// The most members a group may have, and the most callbacks of each kind.
inline constexpr std::size_t max_group_members = 1000;

class group;

/// A pipeline step: a message, or a group (its members run side by side, and the step after it
/// receives the list of their results, in submission order).
class step {
public:
  step(message m) : value_(std::move(m)) {}
  template <class R, class From>
  step(typed_step<R, From> s) : value_(std::move(s.m)) {}
  step(const group& g);

  /// The message, or nullptr for a group.
  const message* as_message() const noexcept { return std::get_if<message>(&value_); }
  /// The group, or nullptr for a message.
  const group* as_group() const noexcept;

private:
  std::variant<message, std::shared_ptr<const group>> value_;
};

class pipeline {
public:
  /// The steps, in order: messages, each with its own id, queue, delay and options, or groups.
  /// Every message of the pipeline gets the option `composition_id` (the pipeline's id: the
  /// first step's id, or the id of a group that is the first step). Throws
  /// troupe::error(invalid_argument) for no step, more than max_pipeline_steps, a step that is
  /// not a valid message, or an id used twice in the pipeline.
  explicit pipeline(std::vector<step> steps);

  /// A pipeline whose links C++ checks: each step after the first takes its predecessor's
  /// result type as its last argument (then) or takes nothing from it (then_ignore); anything
  /// else does not compile.
  ///   troupe::pipeline p(troupe::start(add, 1, 2), troupe::then(twice), troupe::then(twice));
  template <class R, class... Steps>
  explicit pipeline(typed_step<R, void> first, Steps... rest)
      : pipeline(std::vector<step>{step(std::move(first.m)), step(std::move(rest.m))...}) {
    static_assert(detail::links_fit<R, Steps...>::value,
                  "a pipeline step takes what the step before it returns (then), or nothing "
                  "from it (then_ignore)");
  }

  /// The pipeline's id: every message of it carries it as its `composition_id` option.
  const std::string& id() const noexcept { return id_; }
  /// The steps as built. A message step's id is the id of the row the pipeline publishes.
  const std::vector<step>& steps() const noexcept { return steps_; }
  /// The last step, which must be a message (throws troupe::error(invalid_argument) when it is
  /// a group): its result is the pipeline's.
  const message& last() const;
  /// What publishing the pipeline writes: the first step (or, for a group, its members' first
  /// messages), carrying the others in their options (`pipe_target`).
  std::vector<message> messages() const;

  /// Publishes the pipeline through `c`, in one transaction; returns the messages as published.
  /// `options` (a delay) applies to each message the first step publishes; a deduplication
  /// key is refused.
  std::vector<message> run(client& c, const enqueue_options& options = {}) const;
  /// Publishes it inside the caller's transaction on `conn` (enqueue_many_in_transaction): it
  /// exists only if that transaction commits.
  std::vector<message> run_in_transaction(pg_conn* conn, const area& where,
                                          const enqueue_options& options = {}) const;

  /// The last step's result JSON (client::get_result_json of last()).
  std::string get_result_json(client& c, bool block = false,
                              std::chrono::milliseconds timeout = default_result_timeout) const;
  /// Each message step's result JSON, in order (a group step: the JSON array of its members'
  /// results); blocking waits up to `timeout` for each in turn.
  std::vector<std::string>
  get_results_json(client& c, bool block = false,
                   std::chrono::milliseconds timeout = default_result_timeout) const;
  /// How many steps, from the first, have a result that can be read now (steps whose tasks do
  /// not store results never count; a group step counts once it is done).
  std::size_t completed_count(client& c) const;

private:
  std::string id_;
  std::vector<step> steps_;
};

/// A group member: a message, or a pipeline whose last step is a message (its result is the
/// member's).
class member {
public:
  member(message m) : value_(std::move(m)) {}
  template <class R, class From>
  member(typed_step<R, From> s) : value_(std::move(s.m)) {}
  member(pipeline p) : value_(std::move(p)) {}

  const message* as_message() const noexcept { return std::get_if<message>(&value_); }
  const pipeline* as_pipeline() const noexcept { return std::get_if<pipeline>(&value_); }

private:
  std::variant<message, pipeline> value_;
};

/// A group as its own row says: written by the completions of its members.
struct group_status {
  std::string id;
  /// running, done (every member succeeded) or failed (a member failed for good, or was
  /// cancelled, and was not retried since).
  std::string state;
  std::int32_t total = 0;
  /// Members that have succeeded (each counted once, at its first successful completion).
  std::int32_t succeeded = 0;
  /// Members that failed for good (or were cancelled) and were not retried since.
  std::int32_t failed = 0;
  /// The first member that failed: {"member": id, "state": "failed" or "cancelled", "error":
  /// its failure record}; empty while none has.
  std::string error_json;
  std::int64_t created_at_ms = 0;
  /// When it finished (done or failed); 0 while it runs.
  std::int64_t finished_at_ms = 0;
};

class group {
public:
  /// The members, in submission order; each gets the options `composition_id` (the group's
  /// id, or the id of the pipeline it is a step of) and `group_id` (a pipeline member: its
  /// last step only). The group's id is new. Throws troupe::error(invalid_argument) for no
  /// member, more than max_group_members, an invalid message, a pipeline member that ends with
  /// a group, or an id used twice in the group.
  explicit group(std::vector<member> members);

  /// Adds a message published once, when every member has succeeded (in the transaction of
  /// the last member's completion). Returns *this.
  group& on_success(message callback);
  /// Adds a message published once, the first time a member fails for good (or is cancelled).
  group& on_failure(message callback);

  const std::string& id() const noexcept { return id_; }
  const std::vector<member>& members() const noexcept { return members_; }
  const std::vector<message>& on_success_messages() const noexcept { return on_success_; }
  const std::vector<message>& on_failure_messages() const noexcept { return on_failure_; }
  /// The id of the message whose result is each member's, in submission order.
  std::vector<std::string> result_ids() const;
  /// What running the group publishes: each member's first message, the first carrying the
  /// group (option `group_def`), which creates its row in the same statement.
  std::vector<message> messages() const;

  /// Publishes every member through `c`, in one transaction: the group and all its members, or
  /// nothing. `options` (a delay) applies to each; a deduplication key is refused.
  std::vector<message> run(client& c, const enqueue_options& options = {}) const;
  /// Publishes it inside the caller's transaction on `conn`: it exists only if that
  /// transaction commits.
  std::vector<message> run_in_transaction(pg_conn* conn, const area& where,
                                          const enqueue_options& options = {}) const;

  /// Each member's result JSON, in submission order; blocking waits up to `timeout` for each
  /// in turn. Throws what client::get_result_json throws for the first member without one.
  std::vector<std::string>
  get_results_json(client& c, bool block = false,
                   std::chrono::milliseconds timeout = default_result_timeout) const;
  /// Each member's result decoded as `T`.
  template <class T>
  std::vector<T> get_results(client& c, bool block = false,
                             std::chrono::milliseconds timeout = default_result_timeout) const {
    std::vector<T> out;
    for (auto& json : get_results_json(c, block, timeout))
      out.push_back(decode_value<T>(json));
    return out;
  }
  /// The group's row (client::get_group).
  group_status status(client& c) const;
  /// How many members have succeeded, from the group's row (so it does not depend on how long
  /// results are kept).
  std::size_t completed_count(client& c) const;
  /// Whether every member has succeeded.
  bool completed(client& c) const;

private:
  std::string id_;
  std::vector<member> members_;
  std::vector<message> on_success_;
  std::vector<message> on_failure_;
};

inline step::step(const group& g) : value_(std::make_shared<const group>(g)) {}
inline const group* step::as_group() const noexcept {
  auto p = std::get_if<std::shared_ptr<const group>>(&value_);
  return p ? p->get() : nullptr;
}

/// The row of group `id`. Throws troupe::error: not_found when the area holds no such group
/// (never published, or purged by retention), invalid_argument for an id that is not a UUID.
group_status get_group(client& c, const std::string& id);

/// `m` with option `pipe_ignore`: as a pipeline step, it does not receive its predecessor's
/// result.
message pipe_ignore(message m);

} // namespace troupe
