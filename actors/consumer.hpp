// The consumer of one queue on one node, and the executors it supervises.
#pragma once

#include "troupe/node_options.hpp"
#include "troupe/protocol.hpp"
#include "troupe/task.hpp"

#include <atomic>
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
};

/// Spawns the consumer of one queue. It claims up to its free slots (concurrency + prefetch
/// minus what it holds) in one request when woken (notification, jittered poll, due eta), runs
/// each message on an idle executor, and passes outcomes to the completion batcher. It is its
/// executors' supervisor: an executor that dies is replaced, and its message is failed as
/// "executor crashed", never lost. An attempt still running when its time limit plus the
/// time-limit grace has passed is abandoned: its slot gets a new executor, the attempt is
/// recorded as failed (troupe::time_limit_abandoned) under the retry policy, and whatever the
/// old executor reports later is ignored (its completion would be refused anyway).
consumer_actor spawn_consumer(caf::actor_system& sys, consumer_settings settings);

/// Spawns one executor: a detached actor running task code for `consumer` in slot `slot`.
/// `stopping` turns true when the node stops (tasks that asked for shutdown notifications
/// see it through their task_context). `gate` holds the ticket of the last message the
/// executor started; the consumer moves it past every ticket sent to take back what was sent
/// but not started.
executor_actor spawn_executor(caf::local_actor* parent,
                              std::shared_ptr<const task_registry> registry, std::string queue,
                              consumer_actor consumer, std::int32_t slot,
                              std::shared_ptr<const std::atomic<bool>> stopping,
                              std::shared_ptr<std::atomic<std::uint64_t>> gate);

} // namespace troupe::actors
