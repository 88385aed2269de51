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
/// the node is down; until then `sys` must stay alive.
node_actor spawn_worker_node(caf::actor_system& sys, node_options options,
                             std::shared_ptr<const task_registry> tasks);

/// Spawns a storage pool of `connections` storage actors for producers inside a CAF
/// application: `(enqueue_atom, std::vector<storage::new_message>)` publishes without
/// blocking the caller. Stop it with send_exit.
storage_actor spawn_storage_pool(caf::actor_system& sys, const std::string& dsn, const area& where,
                                 int connections = 1);

/// Spawns a result waiter for the area (see result_waiter_actor). Stop it with send_exit.
result_waiter_actor spawn_result_waiter(caf::actor_system& sys, const std::string& dsn,
                                        const area& where);

} // namespace troupe
