// Troupe inside a CAF application: spawn a worker node into an existing actor system, publish
// from actors without blocking them, and wait for results. These typed handles are everything
// an application talks to; the node's own actors and their messages are internal.
//
//   auto node = troupe::spawn_worker_node(sys, options, tasks);
//   self->request(node, caf::infinite, troupe::ready_atom_v).then(...);   // claiming now
//   self->request(node, caf::infinite, troupe::stop_atom_v).then(...);    // graceful stop
//
// Includes CAF: include it only where actors are spawned or addressed.
#pragma once

#include "troupe/coordination.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"
#include "troupe/node_options.hpp"
#include "troupe/task.hpp"

#include <caf/all.hpp>
#include <caf/type_id.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

// The atoms of Troupe's public actor interfaces: the type-id block `troupe`, from
// caf::first_custom_type_id. Troupe's internal block follows it; an application's own block
// starts at troupe::first_application_type_id. Local messaging needs no registration.
CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
CAF_ADD_ATOM(troupe, troupe, stop_atom, "stop")
CAF_ADD_ATOM(troupe, troupe, status_atom, "status")
CAF_ADD_ATOM(troupe, troupe, ready_atom, "ready")
CAF_ADD_ATOM(troupe, troupe, enqueue_atom, "enqueue")
CAF_ADD_ATOM(troupe, troupe, cancel_atom, "cancel")
CAF_ADD_ATOM(troupe, troupe, acquire_atom, "acquire")
CAF_ADD_ATOM(troupe, troupe, give_back_atom, "giveback")
CAF_ADD_ATOM(troupe, troupe, barrier_atom, "barrier")
CAF_ADD_ATOM(troupe, troupe, arrive_atom, "arrive")
CAF_ADD_ATOM(troupe, troupe, limiter_atom, "limiter")
CAF_END_TYPE_ID_BLOCK(troupe)

struct pg_conn; // libpq's PGconn

namespace troupe {

/// Where an application's own type-id block may start: after Troupe's public block and the
/// internal one that follows it (which holds fewer than 64 ids).
inline constexpr caf::type_id_t first_application_type_id = caf::id_block::troupe::end + 64;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, message& x) {
  return f(caf::meta::type_name("message"), x.id, x.queue, x.task, x.args_json, x.options_json,
           x.priority, x.delay_ms, x.timestamp_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, enqueue_options& x) {
  // Milliseconds on the wire; a negative delay stands for "none" (a real one is never
  // negative).
  std::int64_t delay_ms = x.delay ? x.delay->count() : -1;
  std::int64_t ttl_ms = x.deduplication_ttl.count();
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (delay_ms >= 0)
      x.delay = std::chrono::milliseconds{delay_ms};
    else
      x.delay.reset();
    x.deduplication_ttl = std::chrono::milliseconds{ttl_ms};
    return caf::none;
  });
  return f(caf::meta::type_name("enqueue_options"), delay_ms, x.deduplication_key, ttl_ms, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, limit& x) {
  auto kind = static_cast<std::uint8_t>(x.kind);
  std::int64_t span_ms = x.span.count();
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x.kind = static_cast<limit_kind>(kind);
    x.span = std::chrono::milliseconds{span_ms};
    return caf::none;
  });
  return f(caf::meta::type_name("limit"), kind, x.key, x.capacity, span_ms, load);
}

/// A node's account of itself: the reply to status, ready and stop requests.
struct node_report {
  /// 0 until the node has registered.
  std::int32_t node_id = 0;
  /// Its name in the nodes registry and the logs.
  std::string name;
  /// Attempts finished by this node's executors since it started (summed over consumers).
  std::int64_t executed = 0;
  /// Messages handed back to the queue unstarted at shutdown.
  std::int64_t released = 0;
  /// Tasks still running when the shutdown grace ran out, plus executors abandoned past a time
  /// limit whose task had not returned yet.
  std::int64_t abandoned = 0;
  /// The port its metrics endpoint listens on ([metrics]); 0 when it serves none.
  std::int32_t metrics_port = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_report& x) {
  return f(caf::meta::type_name("node_report"), x.node_id, x.name, x.executed, x.released,
           x.abandoned, x.metrics_port);
}

/// The limiter actor of an area (docs/coordination.md): one per worker node, serving its
/// tasks' guards, and any actor's requests, without blocking the requester. A detached actor
/// with its own connection, LISTENing on the area's coordination channel.
///   (acquire_atom, limit, holder, ttl ms) -> bool    takes a slot for `holder` (any string
///                                                    unique to the acquisition) or refuses
///   (give_back_atom, limit, holder) -> bool          gives a concurrent slot back (whether
///                                                    it was held)
///   (barrier_atom, key, parties, ttl ms) -> bool     creates a barrier (true) or finds it
///                                                    with that party count (false)
///   (arrive_atom, key, timeout ms) -> bool           arrives, and replies once the barrier is
///                                                    released (true) or the timeout passes
///                                                    (false); 0 ms replies at once
/// Errors reply as troupe errors: invalid_argument naming the key (a bad limit, a limiter of
/// another kind, a barrier of another party count), not_found (no such barrier),
/// connection_lost.
using limiter_actor = caf::typed_actor<
  caf::replies_to<acquire_atom, limit, std::string, std::int64_t>::with<bool>,
  caf::replies_to<give_back_atom, limit, std::string>::with<bool>,
  caf::replies_to<barrier_atom, std::string, std::int32_t, std::int64_t>::with<bool>,
  caf::replies_to<arrive_atom, std::string, std::int64_t>::with<bool>>;

/// A worker node, as its application addresses it.
using node_actor = caf::typed_actor<
  // graceful stop: stop claiming, finish or abandon running tasks within the grace period,
  // hand back prefetched messages, flush outcomes, deregister; replies once the node is down
  // (an error of category "troupe" when it is already stopping)
  caf::replies_to<stop_atom>::with<node_report>,
  // the node's counters now
  caf::replies_to<status_atom>::with<node_report>,
  // replies once the node has registered and its consumers are claiming (at once when they
  // already are); an error when the node stops or fails first
  caf::replies_to<ready_atom>::with<node_report>,
  // the node's limiter actor (for guards and barriers from the application's actors)
  caf::replies_to<limiter_atom>::with<limiter_actor>>;

/// Publishes for producers inside a CAF application without blocking them: up to 1,000
/// messages atomically, with per-message options (empty, or one entry per message: delay,
/// deduplication key and lifetime). Replies with the messages as stored, in input order, a
/// duplicate's place holding the message that holds its key; refusals are errors of category
/// "troupe" (describe() reads them), given before any database access.
using storage_pool_actor =
  caf::typed_actor<caf::replies_to<enqueue_atom, std::vector<message>,
                                   std::vector<enqueue_options>>::with<std::vector<message>>>;

/// A caller's own libpq connection (non-blocking mode, inside a transaction), lent to the
/// async publisher for one publish. The caller keeps ownership and must not use it until the
/// reply arrives. Only meaningful inside one process.
struct caller_connection {
  pg_conn* native = nullptr;
};

/// Publishes on callers' own connections inside their transactions without blocking them: the
/// CAF form of troupe::async_publish. One detached actor multiplexes every publish in flight
/// with poll(2) and replies when each is done; the requesting actor keeps handling messages
/// meanwhile. Errors are CAF errors of category "troupe": the same refusals as the
/// synchronous functions, and `cancelled` after a cancel_atom.
using async_publisher_actor = caf::typed_actor<
  // a batch: all or nothing in a savepoint of the caller's transaction
  caf::replies_to<enqueue_atom, caller_connection, std::vector<message>,
                  std::vector<enqueue_options>>::with<std::vector<message>>,
  // one message: one statement (a savepoint only with a deduplication key)
  caf::replies_to<enqueue_atom, caller_connection, message, enqueue_options>::with<message>,
  // cancel the publish in flight on that connection (if any)
  caf::reacts_to<cancel_atom, caller_connection>>;

/// Waits for results without blocking the requester: `(get_atom, message id, timeout ms)`
/// replies with the result's JSON text once the message has finished, or with an error of
/// category "troupe" (not_found, timeout, task_failed "type: text", task_skipped,
/// task_cancelled). A detached actor with its own connection, LISTENing on the area's results
/// channel, polling every 500 ms while it has waiters in case a notification was missed.
using result_waiter_actor =
  caf::typed_actor<caf::replies_to<caf::get_atom, std::string, std::int64_t>::with<std::string>>;

/// Turns a Troupe error code and text into a CAF error (category "troupe").
caf::error make_caf_error(errc code, std::string text);
/// The Troupe error held by a CAF error, for logs: "<code>: <text>".
std::string describe(const caf::error& err);

/// What a task actor receives before the task's arguments: which attempt of which message it
/// runs, and how long it has.
struct task_call {
  std::string message_id;
  std::string queue;
  std::string task;
  /// 1 for the first delivery, counted across retries and recoveries.
  std::int32_t attempt = 0;
  /// Milliseconds left before the attempt's time limit when the call was sent (0 when it has
  /// passed already; -1 for an attempt without a limit, which only an inline run can make).
  std::int64_t time_left_ms = 0;
  /// The message's options, as JSON text.
  std::string options_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_call& x) {
  return f(caf::meta::type_name("task_call"), x.message_id, x.queue, x.task, x.attempt,
           x.time_left_ms, x.options_json);
}

/// What a task actor receives, as `(stop_atom, task_stop)`, when an attempt it runs should
/// stop: its time limit passed ("time_limit"), its message's cancel was requested
/// ("cancelled"), or its node is stopping and the task asked to be told ("shutdown"). Sent once
/// per attempt, for the first of these; the actor then answers that attempt's request as soon
/// as it can (an error makes the attempt fail with the matching type; a value completes it).
struct task_stop {
  std::string message_id;
  std::int32_t attempt = 0;
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_stop& x) {
  return f(caf::meta::type_name("task_stop"), x.message_id, x.attempt, x.reason);
}

/// The failure of an attempt whose task actor answered with an error (other than one of
/// category "troupe"), or ended before it answered. Its text is the error's. Retried like any
/// failure; `never_retry_on<troupe::task_actor_error>()` makes it final.
class task_actor_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

template <class Signature>
struct task_actor_traits;

template <class R, class... Args>
struct task_actor_traits<R(Args...)> {
  using call = std::conditional_t<
    std::is_void_v<R>, caf::reacts_to<task_call, std::decay_t<Args>...>,
    typename caf::replies_to<task_call, std::decay_t<Args>...>::template with<R>>;
  using type = caf::typed_actor<call, caf::reacts_to<stop_atom, task_stop>>;
};

/// The actor interface of a task with signature `Signature` (as in its task_ref):
///   (task_call, Args...) -> R       one attempt: the reply (at once, or later through a
///                                    response promise) is its result, an error its failure
///   (stop_atom, task_stop)          the attempt `task_stop` names should stop
template <class Signature>
using task_actor = typename task_actor_traits<Signature>::type;

namespace detail {

/// Where a task actor's answer reaches the executor waiting for it.
class task_reply {
public:
  void succeed(std::string result_json);
  void fail(caf::error err);
  /// The task actor ended before it answered, for the reason `why`.
  void end(std::string why);
  /// Waits up to `limit` for the answer; whether it came.
  bool wait_for(std::chrono::milliseconds limit);
  /// The answer: a result's JSON text, an error, or why there is none.
  std::optional<std::string> result;
  caf::error failure;
  std::string ended;

private:
  std::mutex mutex_;
  std::condition_variable answered_;
  bool done_ = false;
};

/// Sends one attempt's request from `self` (the attempt's bridge actor) and routes the answer
/// to the reply.
using task_request = std::function<void(caf::event_based_actor* self, const task_call& call,
                                        const std::shared_ptr<task_reply>& reply)>;

/// Ends an attempt's bridge once its answer is in: stops watching `target` and quits.
void end_bridge(caf::event_based_actor* self, const caf::actor& target);

/// Runs one attempt on the actor `target` (in its own actor system) and waits for its answer
/// on the executor's thread: sends `(stop_atom, task_stop)` once the context says to stop, and
/// returns the result's JSON text or throws the failure.
std::string await_task_actor(task_context& ctx, const caf::actor& target,
                             const task_request& request);

} // namespace detail

/// Registers `actor` as the implementation of `ref` in `tasks`: each attempt sends the actor a
/// request `(task_call, args...)` from the executor running it, and the actor's answer is the
/// attempt's outcome. The executor's thread waits, never a CAF scheduler thread. The registry
/// keeps a handle to the actor, so the actor lives at least as long as the registry: release
/// both before the actor system is destroyed. Throws troupe::error(invalid_argument) for an
/// invalid handle or a taken name.
template <class R, class... Args>
void define_task_actor(task_registry& tasks, const task_ref<R(Args...)>& ref,
                       task_actor<R(Args...)> actor, task_options options = {}) {
  if (!actor)
    throw error(errc::invalid_argument,
                "task " + ref.name() + ": the task actor handle is invalid");
  auto invoke = [actor](task_context& ctx, std::string_view json) -> std::string {
    auto args =
      std::make_shared<std::tuple<std::decay_t<Args>...>>(decode_args<std::decay_t<Args>...>(json));
    auto request = [actor, args](caf::event_based_actor* self, const task_call& call,
                                 const std::shared_ptr<detail::task_reply>& reply) {
      auto target = caf::actor_cast<caf::actor>(actor);
      auto on_error = [self, target, reply](caf::error& err) {
        reply->fail(std::move(err));
        detail::end_bridge(self, target);
      };
      std::apply(
        [&](const auto&... xs) {
          auto pending = self->request(actor, caf::infinite, call, xs...);
          if constexpr (std::is_void_v<R>) {
            pending.then(
              [self, target, reply] {
                reply->succeed("null");
                detail::end_bridge(self, target);
              },
              on_error);
          } else {
            pending.then(
              [self, target, reply](R& value) {
                try {
                  reply->succeed(encode_value(value));
                } catch (const std::exception& e) {
                  reply->fail(caf::make_error(caf::sec::runtime_error,
                                              std::string("the task actor's result does not "
                                                          "encode as JSON: ") +
                                                e.what()));
                }
                detail::end_bridge(self, target);
              },
              on_error);
          }
        },
        *args);
    };
    return detail::await_task_actor(ctx, caf::actor_cast<caf::actor>(actor), request);
  };
  tasks.add(task_entry{ref.name(), ref.queue(), std::move(invoke), std::move(options)});
}

/// Spawns a worker node into `sys`: its supervisor, listener, storage pool, one consumer per
/// configured queue, the completion batcher and the janitor. Throws troupe::error
/// (invalid_argument) for bad options and for a queue no task runs on (check_queues_served). Stop
/// it with a `stop_atom` request, which replies once the node is down; until then `sys` must stay
/// alive. The standalone troupe::worker_node also sets the system's
/// `work-stealing.moderate-poll-attempts` to 0 (see docs/performance.md); an application's own
/// system may want the same for low latency.
node_actor spawn_worker_node(caf::actor_system& sys, node_options options,
                             std::shared_ptr<const task_registry> tasks);

/// Spawns a storage pool of `connections` storage actors for producers inside a CAF
/// application (see storage_pool_actor). Throws troupe::error (invalid_argument) for a
/// malformed DSN or area. The enqueue hooks of `middleware` run around each request, on the
/// storage actor's thread, as around client::enqueue_many: a before_enqueue hook that throws
/// refuses the request (nothing is written), after_enqueue hooks run once it committed. Stop it
/// with send_exit.
storage_pool_actor spawn_storage_pool(caf::actor_system& sys, const std::string& dsn,
                                      const area& where, int connections = 1,
                                      std::vector<middleware_ptr> middleware = {});

/// Spawns the async publisher for callers' own transactions in area `where` (see
/// async_publisher_actor). The enqueue hooks of `middleware` run on the publisher's thread.
/// Stop it with send_exit.
async_publisher_actor spawn_async_publisher(caf::actor_system& sys, const area& where,
                                            std::vector<middleware_ptr> middleware = {});

/// Spawns a limiter actor for the area (see limiter_actor), for an application without a
/// worker node; a node's own is the reply to its (limiter_atom) request. Throws troupe::error
/// (invalid_argument) for a malformed DSN. Stop it with send_exit.
limiter_actor spawn_limiter(caf::actor_system& sys, const std::string& dsn, const area& where);

/// Spawns a result waiter for the area (see result_waiter_actor). Throws troupe::error
/// (invalid_argument) for a malformed DSN. Stop it with send_exit.
result_waiter_actor spawn_result_waiter(caf::actor_system& sys, const std::string& dsn,
                                        const area& where);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::caller_connection)
