// The typed interfaces of every actor of a worker node, their atoms, and the inspect functions
// of the values they exchange. Read this to know what an actor accepts without reading how it
// works. Includes CAF: include it only where actors are spawned or addressed.
#pragma once

#include "storage/records.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <caf/all.hpp>
#include <caf/type_id.hpp>

#include <cstdint>
#include <string>
#include <vector>

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
CAF_ADD_ATOM(troupe, troupe::atoms, claim_atom, "claim")
CAF_ADD_ATOM(troupe, troupe::atoms, complete_atom, "complete")
CAF_ADD_ATOM(troupe, troupe::atoms, release_atom, "release")
CAF_ADD_ATOM(troupe, troupe::atoms, enqueue_atom, "enqueue")
CAF_ADD_ATOM(troupe, troupe::atoms, reap_atom, "reap")
CAF_ADD_ATOM(troupe, troupe::atoms, stats_atom, "stats")
CAF_ADD_ATOM(troupe, troupe::atoms, wake_atom, "wake")
CAF_ADD_ATOM(troupe, troupe::atoms, run_atom, "run")
CAF_ADD_ATOM(troupe, troupe::atoms, executed_atom, "executed")
CAF_ADD_ATOM(troupe, troupe::atoms, flush_atom, "flush")
CAF_ADD_ATOM(troupe, troupe::atoms, stop_atom, "stop")
CAF_ADD_ATOM(troupe, troupe::atoms, status_atom, "status")
CAF_ADD_ATOM(troupe, troupe::atoms, registered_atom, "registered")
CAF_ADD_ATOM(troupe, troupe::atoms, poll_atom, "poll")
CAF_ADD_ATOM(troupe, troupe::atoms, eta_atom, "eta")
CAF_ADD_ATOM(troupe, troupe::atoms, limit_atom, "limit")
CAF_ADD_ATOM(troupe, troupe::atoms, cancel_atom, "cancel")
CAF_ADD_ATOM(troupe, troupe::atoms, vacuum_atom, "vacuum")
CAF_END_TYPE_ID_BLOCK(troupe)

struct pg_conn; // libpq's PGconn

namespace troupe::storage {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, new_message& x) {
  return f(caf::meta::type_name("new_message"), x.id, x.queue, x.task, x.args_json, x.options_json,
           x.priority, x.delay_ms, x.timestamp_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claimed_message& x) {
  return f(caf::meta::type_name("claimed_message"), x.id, x.task, x.args_json, x.options_json,
           x.attempt, x.priority, x.enqueued_at_ms, x.claim);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, outcome& x) {
  return f(caf::meta::type_name("outcome"), x.id, x.attempt, x.state, x.result_json, x.error_json,
           x.retry_delay_ms, x.follow_ups);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.messages, x.next_eta_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, queue_stats& x) {
  return f(caf::meta::type_name("queue_stats"), x.queue, x.queued, x.running, x.done, x.failed,
           x.cancelled, x.ready, x.scheduled, x.oldest_ready_seconds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reap_report& x) {
  return f(caf::meta::type_name("reap_report"), x.dead_nodes, x.recovered, x.queues,
           x.suspect_nodes, x.cleared_nodes, x.pruned_keys);
}

} // namespace troupe::storage

namespace troupe {

using namespace troupe::atoms;

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

/// A caller's own libpq connection (non-blocking mode, inside a transaction), lent to the
/// async publisher for one publish. The caller keeps ownership and must not use it until the
/// reply arrives. Only meaningful inside one process.
struct caller_connection {
  pg_conn* native = nullptr;
};

/// A node's account of itself (status requests, and the reply to a stop). node_id is 0 until
/// the node has registered.
struct node_report {
  std::int32_t node_id = 0;
  /// Attempts finished by this node's executors since it started (summed over consumers).
  std::int64_t executed = 0;
  /// Messages handed back to the queue unstarted at shutdown.
  std::int64_t released = 0;
  /// Tasks still running when the shutdown grace ran out.
  std::int64_t abandoned = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_report& x) {
  return f(caf::meta::type_name("node_report"), x.node_id, x.executed, x.released, x.abandoned);
}

/// A consumer's counters.
struct consumer_report {
  std::string queue;
  std::int64_t executed = 0;
  std::int64_t released = 0;
  std::int64_t running = 0;
  /// Executors abandoned past a time limit whose task has still not returned.
  std::int64_t stuck = 0;
  /// The executors of the consumer's slots, in slot order.
  std::vector<caf::actor> executors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, consumer_report& x) {
  return f(caf::meta::type_name("consumer_report"), x.queue, x.executed, x.released, x.running,
           x.stuck, x.executors);
}

/// Serializes every database access of one connection (a detached actor owning one PGconn);
/// the storage router offers the same interface over a pool of them.
using storage_actor = caf::typed_actor<
  // claim up to `limit` messages of `queue` for node `node_id`; when fewer than `eta_below`
  // came back, also report when the next delayed message is due
  caf::replies_to<claim_atom, std::string, std::int32_t, std::int32_t,
                  std::int32_t>::with<storage::claim_result>,
  // the same in two steps: the requester gets `(claim_atom, claim, messages)` (its claim's
  // number, and the messages) as soon as their rows are locked, then the reply once they are
  // marked running and committed, holding no messages (storage::claim_batch_early)
  caf::replies_to<claim_atom, std::string, std::int32_t, std::int32_t, std::int32_t,
                  std::uint64_t>::with<storage::claim_result>,
  // write outcomes of node `node_id`; replies with how many were still owned and got written
  caf::replies_to<complete_atom, std::int32_t, std::vector<storage::outcome>>::with<std::int64_t>,
  // put unstarted claimed messages back; replies with how many
  caf::replies_to<release_atom, std::int32_t,
                  std::vector<storage::claimed_message>>::with<std::int64_t>,
  // after a claim with an unknown outcome: put back what node `node_id` owns in `queue`
  // except the ids its consumer holds; replies with how many
  caf::replies_to<release_atom, std::int32_t, std::string,
                  std::vector<std::string>>::with<std::int64_t>,
  // publish messages in one statement; replies with how many
  caf::replies_to<enqueue_atom, std::vector<storage::new_message>>::with<std::int64_t>,
  // publish up to 1,000 messages atomically with per-message options (empty, or one entry per
  // message: delay, deduplication key and lifetime); replies with the messages in input order,
  // a duplicate's place holding the message that holds its key
  caf::replies_to<enqueue_atom, std::vector<message>,
                  std::vector<enqueue_options>>::with<std::vector<message>>,
  // one janitor pass with the given grace (ms) for nodes whose lock is free
  caf::replies_to<reap_atom, std::int64_t>::with<storage::reap_report>,
  // vacuums the queue table if it holds at least this many dead row versions (plus 2 % of its
  // live rows); replies with the dead versions counted when it did, -1 when it did not
  caf::replies_to<vacuum_atom, std::int64_t>::with<std::int64_t>,
  // statistics of one queue, or of all when the name is empty
  caf::replies_to<stats_atom, std::string>::with<std::vector<storage::queue_stats>>>;

/// Runs task code for one consumer; blocking is allowed (a detached actor, one thread each).
/// Gets messages to run in order, several at a time, with the ticket of the first (tickets
/// count up per slot; the next ones follow it). Starts each only if the slot's gate still
/// holds the ticket before it (see actors/consumer.cpp), and reports
/// `(executed_atom, slot, outcome)` for each back to its consumer.
using executor_actor =
  caf::typed_actor<caf::reacts_to<run_atom, std::vector<storage::claimed_message>, std::uint64_t>>;

/// Claims and dispatches the messages of one queue on this node; the only owner of its
/// in-flight set.
using consumer_actor = caf::typed_actor<
  // a hint that the queue may hold ready messages (notification, poll, recovery)
  caf::reacts_to<wake_atom>,
  // the messages of its claim in flight (by number), locked but not yet marked running
  caf::reacts_to<claim_atom, std::uint64_t, std::vector<storage::claimed_message>>,
  // an executor finished an attempt
  caf::reacts_to<executed_atom, std::int32_t, storage::outcome>,
  // the completion batcher settled (wrote, or found refused) this many of its outcomes
  caf::reacts_to<flush_atom, std::int64_t>,
  // stop claiming, hand back prefetched messages, reply once nothing runs
  caf::replies_to<stop_atom>::with<consumer_report>,
  caf::replies_to<status_atom>::with<consumer_report>,
  // its own timers: the jittered poll, the wake at the next delayed message's eta, and the
  // end of an attempt's time limit plus grace (slot, message id, attempt)
  caf::reacts_to<poll_atom>, caf::reacts_to<eta_atom>,
  caf::reacts_to<limit_atom, std::int32_t, std::string, std::int32_t>>;

/// Collects outcomes and writes them in one statement per flush. Tells each sender how many of
/// its outcomes were settled, with `(flush_atom, count)`, after every write.
using batcher_actor =
  caf::typed_actor<caf::reacts_to<complete_atom, storage::outcome>,
                   // write now; replies once every outcome received before it is settled
                   caf::replies_to<flush_atom>::with<std::int64_t>,
                   // its own timer: the flush interval, or the backoff after a failed write
                   caf::reacts_to<poll_atom>>;

/// Waits for results without blocking the requester: `(get_atom, message id, timeout ms)`
/// replies with the result's JSON text once the message has finished, or with an error of
/// category "troupe" (not_found, timeout, task_failed "type: text", task_skipped,
/// task_cancelled). A detached actor with its own connection, LISTENing on the area's results
/// channel, polling every 500 ms while it has waiters in case a notification was missed.
using result_waiter_actor =
  caf::typed_actor<caf::replies_to<caf::get_atom, std::string, std::int64_t>::with<std::string>,
                   // its own timer while waiters are pending
                   caf::reacts_to<poll_atom>>;

/// Looks for dead nodes on a jittered timer and recovers their messages; `reap_atom` runs a
/// pass now and replies with what it found (tests trigger it deterministically this way).
using janitor_actor = caf::typed_actor<caf::reacts_to<poll_atom>,
                                       caf::replies_to<reap_atom>::with<storage::reap_report>>;

/// The root of one worker node: owns, monitors and restarts every other actor of the node.
using node_actor = caf::typed_actor<
  // graceful stop: stop claiming, finish or abandon running tasks within the grace period,
  // flush outcomes, deregister; replies once the node is down
  caf::replies_to<stop_atom>::with<node_report>, caf::replies_to<status_atom>::with<node_report>,
  // the consumer of a queue of this node (an error when the node does not consume it)
  caf::replies_to<caf::get_atom, std::string>::with<consumer_actor>,
  // a hint for one queue ("" = every queue), from the listener or the janitor
  caf::reacts_to<wake_atom, std::string>,
  // the listener registered the node
  caf::reacts_to<registered_atom, std::int32_t>,
  // its own timer: the deadline for the listener to deregister during a stop
  caf::reacts_to<poll_atom>>;

/// Publishes on callers' own connections inside their transactions without blocking them: the
/// CAF form of troupe::async_publish. One detached actor multiplexes every publish in flight
/// with poll(2) and replies when each is done; the requesting actor keeps handling messages
/// meanwhile. Errors are CAF errors of category "troupe" (describe() reads them): the same
/// refusals as the synchronous functions, and `cancelled` after a cancel_atom.
using async_publisher_actor = caf::typed_actor<
  // a batch: all or nothing in a savepoint of the caller's transaction
  caf::replies_to<enqueue_atom, caller_connection, std::vector<message>,
                  std::vector<enqueue_options>>::with<std::vector<message>>,
  // one message: one statement (a savepoint only with a deduplication key)
  caf::replies_to<enqueue_atom, caller_connection, message, enqueue_options>::with<message>,
  // cancel the publish in flight on that connection (if any)
  caf::reacts_to<cancel_atom, caller_connection>,
  // its own loop while publishes are in flight
  caf::reacts_to<poll_atom>>;

/// Turns a Troupe error code and text into a CAF error (category "troupe").
caf::error make_caf_error(errc code, std::string text);
/// The Troupe error held by a CAF error, for logs: "<code>: <text>".
std::string describe(const caf::error& err);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::caller_connection)
