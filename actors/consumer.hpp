// The consumer of one queue on one node: the actor that wires a queue's claims
// (claim_tracker), its executor slots and ready messages (executor_slots), the storage actors
// and the completion batcher together. Its own rules live in those plain classes; this actor
// does the messaging, the timers and the stop.
#pragma once

#include "actors/executor.hpp"
#include "actors/node_metrics.hpp"
#include "actors/protocol.hpp"
#include "troupe/node_options.hpp"
#include "troupe/task.hpp"

#include <chrono>
#include <memory>

namespace troupe::actors {

/// What a consumer needs: its queue settings, its node, and where to claim, run and report.
struct consumer_settings {
  queue_options queue;
  std::int32_t node_id = 0;
  std::shared_ptr<const task_registry> registry;
  storage_actor storage;
  batcher_actor batcher;
  /// How long past its time limit an attempt may run before it is abandoned.
  std::chrono::milliseconds time_limit_grace{5000};
  /// A replacement for a consumer that died: before its first claim it hands back whatever the
  /// node holds of this queue that it does not hold itself (the dead consumer's claims).
  bool recover_on_start = false;
  /// Makes the executors; empty: a thread per executor running the registry's tasks
  /// (thread_executors). Tests pass executors they drive themselves.
  std::function<executor_factory(std::shared_ptr<const std::atomic<bool>> stopping)> executors;
  /// Whether the node holds its liveness lock as the consumer starts; afterwards the node tells
  /// it with `(liveness_atom, held, reaped)`. Without the lock it claims nothing and starts
  /// nothing (running attempts finish); when the lock is back after the node was declared
  /// dead, its prefetched messages are dropped: they went back to their queues.
  bool lock_held = true;
  /// Where its tasks' limit guards go (the node's limiter actor); none: a guard refuses to
  /// work (tests without a node).
  std::shared_ptr<coordination_port> coordination;
  /// Where it records its attempts, claims and load (none: not recorded), and its queue's index
  /// there.
  std::shared_ptr<node_metrics> metrics;
  int metrics_queue = -1;
};

/// Spawns the consumer of one queue. It claims up to its free slots (concurrency + prefetch
/// minus what it holds) in one request when woken (notification, jittered poll, due eta),
/// starts ready messages by priority, then eta, then id on idle executors, and passes outcomes
/// to the completion batcher. An attempt still running when its time limit plus the
/// time-limit grace has passed is abandoned: its slot gets a new executor, the attempt is
/// recorded as failed (troupe::time_limit_abandoned) under the retry policy, and the old
/// executor's thread ends once its task returns, reporting nothing.
consumer_actor spawn_consumer(caf::actor_system& sys, consumer_settings settings);

} // namespace troupe::actors
