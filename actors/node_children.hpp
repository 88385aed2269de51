// The children of a worker node, as one table: what the node supervisor spawns, when, what it
// does when one dies, and how it stops each. Internal to actors/node_supervisor.cpp.
#pragma once

#include "actors/limiter.hpp"
#include "actors/node_metrics.hpp"
#include "actors/protocol.hpp"
#include "http/http_server.hpp"
#include "storage/statements.hpp"

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe::actors {

/// What every child's spawn may read: the node's settings and its children so far.
struct node_context {
  node_options options;
  std::shared_ptr<const task_registry> tasks;
  storage::statement_set_ptr statements;
  storage::node_identity identity;
  /// 0 until the listener registered the node.
  std::int32_t node_id = 0;
  node_supervisor_actor node;
  storage_actor storage;
  batcher_actor batcher;
  /// Whether the listener holds the node's liveness lock (consumers start knowing it).
  bool lock_held = true;
  /// The node's limiter actor (once registered), and the port its tasks' guards use.
  limiter_actor limiter;
  std::shared_ptr<limiter_port> guards;
  /// The node's metrics and the endpoint serving them ([metrics] enabled; else none).
  std::shared_ptr<node_metrics> metrics;
  std::shared_ptr<http::server> metrics_server;
};

/// One row of the table.
struct node_child {
  /// For logs: "the completion batcher", "the consumer of queue emails".
  std::string name;
  /// When it is spawned: with the node, or once the node has registered.
  enum class starts { with_node, once_registered } when = starts::with_node;
  /// What a death does: restart it (at most max_restarts within restart_window, then
  /// escalate), or escalate at once: the node stops, and live nodes recover its messages.
  enum class on_death { restart, escalate } death = on_death::escalate;
  /// How the graceful stop ends it, in this order: `drain` children get a stop request and
  /// the shutdown grace (consumers: running tasks finish, prefetched messages go back); then
  /// `flush` children a flush request (the batcher writes what it holds); then every child
  /// gets an exit, `await_down` children last, and the stop completes when they are down (the
  /// listener deregisters the node on its way out).
  enum class stops { drain, flush, exit, await_down } stop = stops::exit;
  /// Spawns it (`replacing`: after a death); the node supervisor monitors it.
  std::function<caf::actor(caf::actor_system&, node_context&, bool replacing)> spawn;
  /// A queue's consumer: its queue.
  std::string queue;
  /// The listener: its session holds the node's liveness lock, which its death releases.
  bool holds_lock = false;

  caf::actor handle;
  std::deque<std::chrono::steady_clock::time_point> restarts;
};

/// The children of a node with these options, in spawn order: the storage router, the notify
/// listener, then (once registered) the completion batcher, one consumer per queue, and the
/// janitor.
std::vector<node_child> node_children(const node_options& options);

} // namespace troupe::actors
