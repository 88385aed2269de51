#include "actors/node_children.hpp"

#include "actors/completion_batcher.hpp"
#include "actors/consumer.hpp"
#include "actors/janitor.hpp"
#include "actors/notify_listener.hpp"
#include "actors/schedule_publisher.hpp"
#include "actors/storage_actor.hpp"

namespace troupe::actors {

namespace {

storage_settings storage_config(const node_context& n, std::string application_name) {
  return storage_settings{n.options.dsn,
                          n.statements,
                          std::move(application_name),
                          defaults::reconnect_backoff_max,
                          n.options.statement_timeout,
                          n.metrics};
}

const queue_options& queue_of(const node_context& n, const std::string& name) {
  for (const auto& q : n.options.queues)
    if (q.name == name)
      return q;
  throw error(errc::bug, "no queue " + name);
}

} // namespace

std::vector<node_child> node_children(const node_options& options) {
  using starts = node_child::starts;
  using on_death = node_child::on_death;
  using stops = node_child::stops;
  std::vector<node_child> table;
  // The node's pool: claims, outcomes, hand-backs and janitor passes go through it (the
  // listener and the janitor's vacuums have connections of their own).
  table.push_back({"the storage router", starts::with_node, on_death::escalate, stops::exit,
                   [](caf::actor_system& sys, node_context& n, bool) {
                     n.storage = spawn_storage_router(sys, storage_config(n, "troupe-node"),
                                                      n.options.storage_connections);
                     return caf::actor_cast<caf::actor>(n.storage);
                   }});
  // Registers the node, holds its liveness lock, and turns notifications into wakes. A
  // restarted listener takes the node's lock again (its node_id is known by then).
  node_child listener{"the notify listener", starts::with_node, on_death::restart,
                      stops::await_down, [](caf::actor_system& sys, node_context& n, bool) {
                        return spawn_notify_listener(
                          sys,
                          listener_settings{n.options.dsn, n.statements, n.identity, n.node,
                                            n.node_id, defaults::listener_reconnect_backoff_max,
                                            n.options.statement_timeout});
                      }};
  listener.holds_lock = true;
  table.push_back(std::move(listener));
  table.push_back({"the completion batcher", starts::once_registered, on_death::escalate,
                   stops::flush, [](caf::actor_system& sys, node_context& n, bool) {
                     n.batcher = spawn_completion_batcher(
                       sys,
                       batcher_settings{n.node_id, n.storage, n.options.completion_flush_interval,
                                        n.options.completion_batch_size, n.metrics});
                     return caf::actor_cast<caf::actor>(n.batcher);
                   }});
  // Serves the guards of the node's tasks and the application's actors (limiter_actor); a
  // restarted one takes over the port the tasks use.
  table.push_back({"the limiter actor", starts::once_registered, on_death::restart, stops::exit,
                   [](caf::actor_system& sys, node_context& n, bool) {
                     n.limiter = spawn_limiter_actor(
                       sys, limiter_settings{n.options.dsn, n.statements, n.node_id});
                     if (!n.guards)
                       n.guards = std::make_shared<limiter_port>(n.options.limits);
                     n.guards->set(n.limiter);
                     return caf::actor_cast<caf::actor>(n.limiter);
                   }});
  // A replacement consumer hands back what the dead one held before it claims anything.
  for (const auto& q : options.queues) {
    node_child c{
      "the consumer of queue " + q.name, starts::once_registered, on_death::restart, stops::drain,
      [name = q.name](caf::actor_system& sys, node_context& n, bool replacing) {
        consumer_settings cs{queue_of(n, name),          n.node_id, n.tasks, n.storage,  n.batcher,
                             n.options.time_limit_grace, replacing, {},      n.lock_held};
        cs.coordination = n.guards;
        if (n.metrics) {
          cs.metrics = n.metrics;
          cs.metrics_queue = n.metrics->queue_index(name);
        }
        return caf::actor_cast<caf::actor>(spawn_consumer(sys, std::move(cs)));
      }};
    c.queue = q.name;
    table.push_back(std::move(c));
  }
  // Vacuums on a storage actor of its own (linked to it), so a long vacuum never holds up the
  // pool's claims and writes.
  table.push_back(
    {"the janitor", starts::once_registered, on_death::escalate, stops::exit,
     [](caf::actor_system& sys, node_context& n, bool) {
       janitor_settings js{n.storage, n.options.janitor_interval, n.options.dead_node_grace};
       js.keep =
         storage::retention{n.options.retention_done.count(), n.options.retention_failed.count(),
                            n.options.retention_cancelled.count()};
       js.statements = n.statements;
       if (n.options.vacuum_dead_rows > 0) {
         js.upkeep = spawn_storage_actor(sys, storage_config(n, "troupe-node-upkeep"));
         js.vacuum_dead_rows = n.options.vacuum_dead_rows;
       }
       return caf::actor_cast<caf::actor>(spawn_janitor(sys, std::move(js)));
     }});
  // Publishes the area's due schedules, on a connection of its own; a restarted one goes on
  // where the schedules' rows say (each occurrence is published once, whoever ticks).
  if (options.scheduler.enabled)
    table.push_back({"the scheduler", starts::with_node, on_death::restart, stops::exit,
                     [](caf::actor_system& sys, node_context& n, bool) {
                       scheduler_options so;
                       so.dsn = n.options.dsn;
                       so.area = n.options.area;
                       so.poll = n.options.scheduler.poll;
                       so.batch = n.options.scheduler.batch;
                       so.application_name = "troupe-node-scheduler";
                       return caf::actor_cast<caf::actor>(spawn_schedule_publisher(sys, so));
                     }});
  return table;
}

} // namespace troupe::actors
