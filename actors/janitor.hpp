// The janitor: finds dead nodes (liveness lock free) and puts their running messages back.
#pragma once

#include "troupe/protocol.hpp"

#include <chrono>

namespace troupe::actors {

struct janitor_settings {
  storage_actor storage;
  std::chrono::milliseconds interval{2000};
  /// How long a node's lock must stay free before the node counts as dead.
  std::chrono::milliseconds dead_node_grace{3000};
};

/// Spawns the janitor. Its first pass runs at once, then every interval (jittered by 10 %); a
/// pass never starts while the previous one is still running.
janitor_actor spawn_janitor(caf::actor_system& sys, janitor_settings settings);

} // namespace troupe::actors
