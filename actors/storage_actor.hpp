// The storage actor (one detached actor per PostgreSQL connection) and the storage router
// that spreads requests over a supervised pool of them.
#pragma once

#include "actors/node_metrics.hpp"
#include "actors/protocol.hpp"
#include "storage/statements.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace troupe::actors {

/// What a storage actor connects to.
struct storage_settings {
  std::string dsn;
  storage::statement_set_ptr statements;
  std::string application_name = "troupe-storage";
  std::chrono::milliseconds reconnect_backoff_max{5000};
  /// The connection's statement_timeout; zero leaves the server's.
  std::chrono::milliseconds statement_timeout{0};
  /// Where failed requests are counted by kind (none: not counted).
  std::shared_ptr<node_metrics> metrics;
  /// The middleware whose enqueue hooks run around enqueue requests (a producers' pool).
  std::vector<middleware_ptr> enqueue_hooks;
};

/// Spawns one detached storage actor. It opens its connection lazily and, after a loss, again
/// with exponential backoff; requests that arrive while it is down fail at once with
/// errc::connection_lost, so callers decide when to try again.
storage_actor spawn_storage_actor(caf::actor_system& sys, storage_settings settings);

/// Spawns the router over `size` storage actors. It delegates each request to the next actor
/// in turn and respawns an actor that dies.
storage_actor spawn_storage_router(caf::actor_system& sys, storage_settings settings, int size);

} // namespace troupe::actors
