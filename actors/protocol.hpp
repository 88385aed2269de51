// The typed interfaces of a worker node's own actors, their atoms, and the inspect functions of
// the values they exchange: internal to Troupe (not installed). Read this to know what an actor
// accepts without reading how it works. What applications address is in <troupe/caf.hpp>; each
// internal interface that extends a public one says so.
//
// Every atom has one meaning. Timers an actor sends itself: poll_atom (its periodic timer),
// eta_atom, limit_atom and deadline_atom (one-off timers named for what they wait for).
#pragma once

#include "storage/records.hpp"
#include "troupe/caf.hpp"

#include <cstdint>
#include <string>
#include <vector>

CAF_BEGIN_TYPE_ID_BLOCK(troupe_internal, caf::id_block::troupe::end)
// Requests to the storage actors.
CAF_ADD_ATOM(troupe_internal, troupe::actors, claim_atom, "claim")
CAF_ADD_ATOM(troupe_internal, troupe::actors, next_eta_atom, "nexteta")
CAF_ADD_ATOM(troupe_internal, troupe::actors, complete_atom, "complete")
CAF_ADD_ATOM(troupe_internal, troupe::actors, release_atom, "release")
CAF_ADD_ATOM(troupe_internal, troupe::actors, recover_atom, "recover")
CAF_ADD_ATOM(troupe_internal, troupe::actors, reap_atom, "reap")
CAF_ADD_ATOM(troupe_internal, troupe::actors, vacuum_atom, "vacuum")
CAF_ADD_ATOM(troupe_internal, troupe::actors, stats_atom, "stats")
CAF_ADD_ATOM(troupe_internal, troupe::actors, mark_started_atom, "markstart")
CAF_ADD_ATOM(troupe_internal, troupe::actors, purge_atom, "purge")
CAF_ADD_ATOM(troupe_internal, troupe::actors, tidy_atom, "tidy")
CAF_ADD_ATOM(troupe_internal, troupe::actors, progress_atom, "progress")
// Reports between the node's actors.
CAF_ADD_ATOM(troupe_internal, troupe::actors, locked_atom, "locked")
CAF_ADD_ATOM(troupe_internal, troupe::actors, executed_atom, "executed")
CAF_ADD_ATOM(troupe_internal, troupe::actors, settled_atom, "settled")
CAF_ADD_ATOM(troupe_internal, troupe::actors, flush_atom, "flush")
CAF_ADD_ATOM(troupe_internal, troupe::actors, wake_atom, "wake")
CAF_ADD_ATOM(troupe_internal, troupe::actors, registered_atom, "registered")
CAF_ADD_ATOM(troupe_internal, troupe::actors, liveness_atom, "liveness")
CAF_ADD_ATOM(troupe_internal, troupe::actors, control_atom, "control")
CAF_ADD_ATOM(troupe_internal, troupe::actors, pause_atom, "pause")
CAF_ADD_ATOM(troupe_internal, troupe::actors, cancels_atom, "cancels")
// Timers.
CAF_ADD_ATOM(troupe_internal, troupe::actors, poll_atom, "poll")
CAF_ADD_ATOM(troupe_internal, troupe::actors, eta_atom, "eta")
CAF_ADD_ATOM(troupe_internal, troupe::actors, limit_atom, "limit")
CAF_ADD_ATOM(troupe_internal, troupe::actors, deadline_atom, "deadline")
CAF_ADD_ATOM(troupe_internal, troupe::actors, starts_atom, "starts")
CAF_ADD_ATOM(troupe_internal, troupe::actors, confirm_start_atom, "confirm")
CAF_END_TYPE_ID_BLOCK(troupe_internal)

static_assert(caf::id_block::troupe_internal::end <= troupe::first_application_type_id,
              "the internal type-id block outgrew the room <troupe/caf.hpp> leaves for it");

namespace troupe::storage {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claimed_message& x) {
  return f(caf::meta::type_name("claimed_message"), x.id, x.task, x.args_json, x.options_json,
           x.attempt, x.priority, x.enqueued_at_ms, x.eta_ms, x.claim, x.confirm_start,
           x.previous_lost);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, outcome& x) {
  return f(caf::meta::type_name("outcome"), x.id, x.attempt, x.state, x.result_json, x.error_json,
           x.retry_delay_ms, x.ran_ms, x.progress_json, x.result_ttl_ms, x.follow_ups);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, started_attempt& x) {
  return f(caf::meta::type_name("started_attempt"), x.id, x.attempt, x.elapsed_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_update& x) {
  return f(caf::meta::type_name("progress_update"), x.id, x.attempt, x.progress_json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.messages, x.next_eta_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recovery_result& x) {
  return f(caf::meta::type_name("recovery_result"), x.handed_back, x.committed);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reap_report& x) {
  return f(caf::meta::type_name("reap_report"), x.dead_nodes, x.recovered, x.queues,
           x.suspect_nodes, x.cleared_nodes, x.pruned_keys);
}

} // namespace troupe::storage

namespace troupe {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, queue_stats& x) {
  return f(caf::meta::type_name("queue_stats"), x.queue, x.queued, x.running, x.done, x.failed,
           x.cancelled, x.ready, x.scheduled, x.oldest_ready_seconds);
}

} // namespace troupe

namespace troupe::actors {

/// A consumer's counters.
struct consumer_report {
  std::string queue;
  std::int64_t executed = 0;
  std::int64_t released = 0;
  std::int64_t running = 0;
  /// Executors abandoned past a time limit whose task has still not returned.
  std::int64_t stuck = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, consumer_report& x) {
  return f(caf::meta::type_name("consumer_report"), x.queue, x.executed, x.released, x.running,
           x.stuck);
}

/// Serializes every database access of one connection (a detached actor owning one PGconn);
/// the storage router offers the same interface over a pool of them. Extends the public
/// storage_pool_actor (publishing) with what the node's own actors ask.
using storage_actor = storage_pool_actor::extend<
  // claims up to `limit` messages of `queue` for node `node_id` in two steps: the requester
  // gets `(locked_atom, claim, messages)` (its claim's number, and the messages) as soon as
  // their rows are locked, then the reply once they are marked running and committed, holding
  // no messages; when fewer than `eta_below` came, the reply also says when the next delayed
  // message is due; the first `starting` start at once on idle executors, and their start is
  // written with the claim (storage::claim_batch_early)
  caf::replies_to<claim_atom, std::string, std::int32_t, std::int32_t, std::int32_t, std::int32_t,
                  std::uint64_t>::with<storage::claim_result>,
  // milliseconds until the next delayed message of `queue` is due, -1 when none is known
  caf::replies_to<next_eta_atom, std::string>::with<std::int64_t>,
  // writes outcomes of node `node_id`; replies with how many were still owned and got written
  caf::replies_to<complete_atom, std::int32_t, std::vector<storage::outcome>>::with<std::int64_t>,
  // puts unstarted claimed messages back; replies with how many
  caf::replies_to<release_atom, std::int32_t,
                  std::vector<storage::claimed_message>>::with<std::int64_t>,
  // after a claim with an unknown outcome: waits until that claim's transaction has ended,
  // tells which of its started messages (`started`: ids with their claim's attempts) it
  // committed, then puts back what node `node_id` owns in `queue` except the ids its consumer
  // holds (storage::recover_unheld)
  caf::replies_to<recover_atom, std::int32_t, std::string, std::vector<std::string>,
                  std::vector<storage::claimed_message>>::with<storage::recovery_result>,
  // one janitor pass with the given grace (ms) for nodes whose lock is free
  caf::replies_to<reap_atom, std::int64_t>::with<storage::reap_report>,
  // vacuums the queue table if it holds at least this many dead row versions (plus 2 % of its
  // live rows); replies with the dead versions counted when it did, -1 when it did not
  caf::replies_to<vacuum_atom, std::int64_t>::with<std::int64_t>,
  // statistics of one queue, or of all when the name is empty
  caf::replies_to<stats_atom, std::string>::with<std::vector<queue_stats>>,
  // writes the starts of attempts of node `node_id` that still run (storage::mark_started);
  // replies with how many rows took it
  caf::replies_to<mark_started_atom, std::int32_t,
                  std::vector<storage::started_attempt>>::with<std::int64_t>,
  // writes the starts of attempts of node `node_id` that begin now and must not run before
  // their start is written (storage::confirm_starts); replies with the ids written
  caf::replies_to<confirm_start_atom, std::int32_t,
                  std::vector<storage::started_attempt>>::with<std::vector<std::string>>,
  // writes the progress of attempts of node `node_id` that still run (storage::write_progress);
  // replies with how many rows took it
  caf::replies_to<progress_atom, std::int32_t,
                  std::vector<storage::progress_update>>::with<std::int64_t>,
  // one retention pass: finished rows older than these windows (ms; done, failed, cancelled;
  // 0 keeps them), up to 1,000 of each state; replies with how many went
  caf::replies_to<purge_atom, std::int64_t, std::int64_t, std::int64_t>::with<std::int64_t>,
  // the end of a janitor pass: adds the pending changes to the finished counts
  // (storage::fold_state_counts) and clears up to `limit` stored results past their
  // result_ttl (storage::expire_results); replies with how many results
  caf::replies_to<tidy_atom, std::int32_t>::with<std::int64_t>>;

/// Claims and dispatches the messages of one queue on this node; the only owner of its
/// in-flight set (actors/consumer.hpp).
using consumer_actor = caf::typed_actor<
  // a hint that the queue may hold ready messages (notification, poll, recovery)
  caf::reacts_to<wake_atom>,
  // the messages of its claim in flight (by number), locked but not yet marked running
  caf::reacts_to<locked_atom, std::uint64_t, std::vector<storage::claimed_message>>,
  // the executor of slot `slot` (the slot's executor number `serial`) finished an attempt
  caf::reacts_to<executed_atom, std::int32_t, std::uint64_t, storage::outcome>,
  // the completion batcher settled (wrote, or found refused) this many of its outcomes
  caf::reacts_to<settled_atom, std::int64_t>,
  // whether the node holds its liveness lock; when it has it back, whether it had been
  // declared dead meanwhile (its messages recovered): without the lock, nothing is claimed
  // and nothing starts
  caf::reacts_to<liveness_atom, bool, bool>,
  // whether the queue is paused: while it is, nothing is claimed or started, and prefetched
  // messages go back to the queue
  caf::reacts_to<pause_atom, bool>,
  // these messages (ids) had their cancel requested: one not started is cancelled and never
  // starts; a running one's task is told
  caf::reacts_to<cancels_atom, std::vector<std::string>>,
  // a task reported progress where none waited: it is written with the next starts
  caf::reacts_to<progress_atom>,
  // stop claiming, hand back prefetched messages, reply once nothing runs
  caf::replies_to<stop_atom>::with<consumer_report>,
  caf::replies_to<status_atom>::with<consumer_report>,
  // its own timers: the jittered poll, the wake at the next delayed message's eta, and the
  // end of the time limit plus grace of the attempt running in a slot, and the second after
  // which the starts of attempts still running are written
  caf::reacts_to<poll_atom>, caf::reacts_to<eta_atom>, caf::reacts_to<limit_atom, std::int32_t>,
  caf::reacts_to<starts_atom>,
  // an executor waits for the start of a message that came back from a dead node
  caf::reacts_to<confirm_start_atom>>;

/// Collects outcomes and writes them in one statement per flush. Tells each sender how many of
/// its outcomes were settled, with `(settled_atom, count)`, after every write.
using batcher_actor =
  caf::typed_actor<caf::reacts_to<complete_atom, storage::outcome>,
                   // write now; replies once every outcome received before it is settled
                   caf::replies_to<flush_atom>::with<std::int64_t>,
                   // the node's liveness lock is back (held, reaped): when the node had been
                   // declared dead, every outcome received so far is of a delivery the janitor
                   // took back, and is dropped (a later claim may deliver the same message
                   // with the same attempt number)
                   caf::reacts_to<liveness_atom, bool, bool>,
                   // its own timer: the flush interval, or the backoff after a failed write
                   caf::reacts_to<poll_atom>>;

/// Looks for dead nodes on a jittered timer and recovers their messages; `reap_atom` runs a
/// pass now and replies with what it found (tests trigger it deterministically this way).
using janitor_actor = caf::typed_actor<caf::reacts_to<poll_atom>,
                                       caf::replies_to<reap_atom>::with<storage::reap_report>>;

/// Publishes the area's due schedules on its own timer (actors/schedule_publisher.hpp).
using schedule_publisher_actor = caf::typed_actor<caf::reacts_to<poll_atom>>;

/// The root of one worker node (actors/node_supervisor.hpp): the public node_actor, plus what
/// its children and tests tell it.
using node_supervisor_actor = node_actor::extend<
  // the consumer of a queue of this node (an error when the node does not consume it)
  caf::replies_to<caf::get_atom, std::string>::with<consumer_actor>,
  // a hint for one queue ("" = every queue), from the listener or the janitor
  caf::reacts_to<wake_atom, std::string>,
  // the listener registered the node
  caf::reacts_to<registered_atom, std::int32_t>,
  // the listener lost the node's liveness lock (false), or has it back (true; and whether the
  // node had been declared dead meanwhile)
  caf::reacts_to<liveness_atom, bool, bool>,
  // the control poll: the node's paused queues, and the messages it holds whose cancel was
  // requested (their queues and ids, in parallel)
  caf::reacts_to<control_atom, std::vector<std::string>, std::vector<std::string>,
                 std::vector<std::string>>,
  // its own timer: the deadline for the listener to deregister during a stop
  caf::reacts_to<deadline_atom>>;

/// The result waiter's own type: the public interface and its poll while waiters are pending.
using result_waiter_impl_actor = result_waiter_actor::extend<caf::reacts_to<poll_atom>>;

/// The async publisher's own type: the public interface and its loop while publishes are in
/// flight.
using async_publisher_impl_actor = async_publisher_actor::extend<caf::reacts_to<poll_atom>>;

} // namespace troupe::actors
