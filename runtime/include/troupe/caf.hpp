// Troupe inside a CAF application: spawn a worker node into an existing actor system and talk
// to it (and to its storage) through the typed handles of <troupe/protocol.hpp>.
#pragma once

#include "troupe/client.hpp"
#include "troupe/node_options.hpp"
#include "troupe/protocol.hpp"
#include "troupe/task.hpp"

#include <memory>

namespace troupe {

/// Spawns a worker node into `sys`: its supervisor, listener, storage pool, one consumer per
/// configured queue, the completion batcher and the janitor. Throws troupe::error
/// (invalid_argument) for bad options. Stop it with a `stop_atom` request, which replies once
/// the node is down; until then `sys` must stay alive. The standalone troupe::worker_node also
/// sets the system's `work-stealing.moderate-poll-attempts` to 0 (see docs/performance.md);
/// an application's own system may want the same for low latency.
node_actor spawn_worker_node(caf::actor_system& sys, node_options options,
                             std::shared_ptr<const task_registry> tasks);

/// Spawns a storage pool of `connections` storage actors for producers inside a CAF
/// application: `(enqueue_atom, std::vector<message>, std::vector<enqueue_options>)` publishes
/// up to 1,000 messages atomically, with delays and deduplication keys, without blocking the
/// caller (and `(enqueue_atom, std::vector<storage::new_message>)` inserts raw rows). No
/// middleware runs there. Stop it with send_exit.
storage_actor spawn_storage_pool(caf::actor_system& sys, const std::string& dsn, const area& where,
                                 int connections = 1);

/// Spawns the async publisher for callers' own transactions in area `where` (see
/// async_publisher_actor): `(enqueue_atom, caller_connection, batch, options)` and
/// `(enqueue_atom, caller_connection, message, options)`, answered once the statements ran on
/// the caller's non-blocking connection; `(cancel_atom, caller_connection)` cancels. The
/// enqueue hooks of `middleware` run on the publisher's thread. Stop it with send_exit.
async_publisher_actor spawn_async_publisher(caf::actor_system& sys, const area& where,
                                            std::vector<middleware_ptr> middleware = {});

/// Spawns a result waiter for the area (see result_waiter_actor). Stop it with send_exit.
result_waiter_actor spawn_result_waiter(caf::actor_system& sys, const std::string& dsn,
                                        const area& where);

} // namespace troupe
