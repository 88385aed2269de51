// The notify listener: one per node, on its own connection, in a detached blocking actor. It
// registers the node and holds its liveness lock for the node's lifetime, LISTENs on the area's
// wake channel, and turns each notification into a wake hint for the node.
#pragma once

#include "actors/protocol.hpp"
#include "actors/wake_payload.hpp"
#include "storage/records.hpp"
#include "storage/statements.hpp"

#include <chrono>
#include <string>

namespace troupe::actors {

struct listener_settings {
  std::string dsn;
  storage::statement_set_ptr statements;
  storage::node_identity identity;
  /// The node to report to: `(registered_atom, id)` once, then `(wake_atom, queue)` per hint
  /// and `(wake_atom, "")` after every reconnect (notifications may have been missed).
  node_supervisor_actor node;
  /// 0: register a new node; otherwise take this node's lock again (a restarted listener).
  std::int32_t node_id = 0;
  std::chrono::milliseconds reconnect_backoff_max{5000};
  /// The connection's statement_timeout; zero leaves the server's.
  std::chrono::milliseconds statement_timeout{0};
};

/// Spawns the listener. A lost connection is reopened with backoff, the node's lock retaken
/// (and its row restored if a janitor removed it). A payload that is not a valid queue name is
/// ignored. On a shutdown exit it removes the node's row and closes its connection, which
/// releases the lock.
caf::actor spawn_notify_listener(caf::actor_system& sys, listener_settings settings);

} // namespace troupe::actors
